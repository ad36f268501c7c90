"""`present(x)`: a value the test knows is there, typed without its None (Qt's `item(i)`, a
report once built, the current conversation's id); None fails the test, as using it would."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    assert value is not None
    return value

"""A long draft's count, made on the meter's thread one at a time: the count of the draft as it
is now, a draft changed meanwhile (typing beside a held paste) counted after it, as it is then."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

Key = tuple[str, int, int]  # (the tokenizer, the draft's length, its hash)
Aside = Callable[[Callable[[], int], Callable[[int | None], None]], None]


class LongDraftCount:
    def __init__(self, aside: Aside, counted: Callable[[], None]) -> None:
        self._aside = aside  # runs the count off the window's thread, then its result on it
        self._counted = counted  # told once a count is known
        self._known: tuple[Key, int] | None = None
        self._counting: Key | None = None  # the one being counted
        self._next: tuple[Key, Callable[[], int]] | None = None

    def known(self, key: Key) -> int | None:
        """The tokens of the draft `key` names, once counted."""
        return self._known[1] if self._known is not None and self._known[0] == key else None

    def ask(self, key: Key, count: Callable[[], int]) -> None:
        if self._counting is not None:
            if self._counting != key:
                self._next = (key, count)
            return
        self._counting, self._next = key, None
        self._aside(count, partial(self._done, key))

    def _done(self, key: Key, tokens: int | None) -> None:
        self._counting = None
        following, self._next = self._next, None
        if following is not None:
            self.ask(*following)
        if tokens is None:
            return
        self._known = (key, tokens)
        self._counted()

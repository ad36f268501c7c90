"""Bugs the fuzzer finds that are being fixed elsewhere: while one is listed here, the invariant
that catches it records the hit (said at the end of the run) instead of failing. Each check
names the bug it may excuse and excuses only that bug's shape; anything else fails at once.
Delete an entry once its fix is merged: its invariant is then strict again."""

from __future__ import annotations

from collections import Counter

KNOWN_BUGS: dict[str, str] = {}

# How often each known bug was hit in this process (the summary at the end of a run).
HITS: Counter[str] = Counter()


def violated(bug: str | None, message: str) -> None:
    """An invariant does not hold: fails, unless `bug` names a bug still listed (then counted)."""
    if bug is not None and bug in KNOWN_BUGS:
        HITS[bug] += 1
        return
    raise AssertionError(message if bug is None else f"[{bug}] {message}")

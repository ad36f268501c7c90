"""Bugs the fuzzer finds that are being fixed elsewhere: while one is listed here, the invariant
that catches it records the hit (said at the end of the run) instead of failing. Each check
names the bug it may excuse and excuses only that bug's shape; anything else fails at once.
Delete an entry once its fix is merged: its invariant is then strict again."""

from __future__ import annotations

from collections import Counter

KNOWN_BUGS: dict[str, str] = {
    # Found by this fuzzer (steps: tests/fuzz/test_regressions.py), not fixed here: the fix is
    # a decision about what a request may start with, in core/context (normalize or build).
    "F1": "Excluding the conversation's first user message makes the next request start with "
          "the assistant's answer after the system prompt (Anthropic refuses it: the first "
          "message must be the user's). Caught by: every request is valid.",
    "F2": "Excluding every user message (e.g. the only one, after its answer failed, then "
          "Retry) sends a request with nothing but the system prompt (Anthropic refuses an "
          "empty messages list; an OpenAI model answers nothing in particular). Caught by: "
          "every request is valid.",
}

# How often each known bug was hit in this process (the summary at the end of a run).
HITS: Counter[str] = Counter()


def violated(bug: str | None, message: str) -> None:
    """An invariant does not hold: fails, unless `bug` names a bug still listed (then counted)."""
    if bug is not None and bug in KNOWN_BUGS:
        HITS[bug] += 1
        return
    raise AssertionError(message if bug is None else f"[{bug}] {message}")

"""What a conversation's log adds up to, read as bytes: its entries (annotations, which mark
other entries, not counted) and what they cost (core.cost), without parsing a line. The list of
conversations recounts after every append, so only what was appended since an earlier reading
is read: a 10,000-entry log is tens of megabytes.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from core import confined
from core.store.log import MAX_LOG

# An entry's cost: its own key, which no provider's usage object has. Inside a string the key
# would be escaped (never counted); a negative or broken figure is no cost (`kept`).
COST_KEY = re.compile(rb'(?<!\\)"cost_usd":([0-9][0-9.]*(?:[eE][+-]?[0-9]+)?)')
# An annotation entry's line (a pin, an exclude): a mark on a message, not one to count.
ANNOTATION_KEY = re.compile(rb'(?<!\\)"kind":"annotation"')


def tally(log: Path, since: tuple[int, int, float] | None = None) -> tuple[int, float]:
    """(entries, USD they cost) of the log at `log`; `since`: (size, count, cost) of an earlier
    reading (the log only grows: the rest is read from there). A log that cannot be read
    counts nothing (the conversation says why when it is opened)."""
    try:
        with confined.opened(log, MAX_LOG, root=None) as f:
            count, cost = 0, 0.0
            if since is not None and since[0] > 0:
                f.seek(since[0] - 1)
                if f.read(1) == b"\n":  # still the file it was (it ended on a line)
                    count, cost = since[1], since[2]
                else:
                    f.seek(0)
            tail = b""
            while chunk := f.read(1 << 20):
                count += chunk.count(b"\n")
                lines = tail + chunk
                cut = lines.rfind(b"\n") + 1  # costs of whole lines only
                whole, tail = lines[:cut], lines[cut:]
                if b'"cost_usd":' in whole:
                    cost += sum(_dollars(x) for x in COST_KEY.findall(whole))
                if b'"annotation"' in whole:
                    count -= len(ANNOTATION_KEY.findall(whole))
            return count, cost
    except (OSError, ValueError):
        return 0, 0.0


def kept(cost: Any) -> float | None:
    """A cost as a log or a file states it: a finite number of dollars, not below zero; else
    unknown (a shipped log's negative "cost" must not cancel real spending)."""
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return None
    return float(cost) if math.isfinite(cost) and cost >= 0 else None


def _dollars(text: bytes) -> float:
    try:
        return kept(float(text)) or 0.0
    except ValueError:
        return 0.0

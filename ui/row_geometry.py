"""Where each transcript row sits: a list of row heights and their running sums.

The transcript view asks this, never Qt's item layout, where a row is and which row covers a
pixel. Heights change one row at a time (a row painted for the first time, a row expanded, the
streaming row growing); the running sums are rebuilt lazily in one C-level pass
(`itertools.accumulate`, well under a millisecond for 10,000 rows) the next time a position is
asked, so a burst of changes costs one pass, and a lookup is a binary search.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate


class RowGeometry:
    def __init__(self) -> None:
        self._heights: list[int] = []
        self._tops: list[int] | None = [0]  # len(heights) + 1 running sums; None: stale

    def __len__(self) -> int:
        return len(self._heights)

    def reset(self, heights: Iterable[int]) -> None:
        self._heights = [max(1, h) for h in heights]
        self._tops = None

    def insert(self, first: int, heights: Iterable[int]) -> None:
        self._heights[first:first] = [max(1, h) for h in heights]
        self._tops = None

    def remove(self, first: int, last: int) -> None:
        del self._heights[first:last + 1]
        self._tops = None

    def height(self, row: int) -> int:
        return self._heights[row]

    def set_height(self, row: int, height: int) -> int:
        """Set a row's height; returns the change in pixels."""
        height = max(1, height)
        delta = height - self._heights[row]
        if delta:
            self._heights[row] = height
            self._tops = None
        return delta

    def _sums(self) -> list[int]:
        if self._tops is None:
            self._tops = list(accumulate(self._heights, initial=0))
        return self._tops

    def top(self, row: int) -> int:
        return self._sums()[row]

    def total(self) -> int:
        return self._sums()[-1]

    def row_at(self, y: int) -> int:
        """The row covering content offset `y` (clamped to the first and last row); -1 when
        there are no rows."""
        if not self._heights:
            return -1
        return min(len(self._heights) - 1, max(0, bisect_right(self._sums(), y) - 1))

"""How tall each transcript row is: exact once it was painted, estimated before.

A relayout at a new width (the window resized, the Inspector opened) asks for every row's
height: on a 10,000-row conversation the estimate must cost a sum per row, so what does not
depend on the width (the lengths of the lines a row shows, clipped as the layout clips them,
and whether it has a footer) is kept per row version.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QFontMetrics

from ui.transcript_model import Row, RowKind
from ui.transcript_text import body_text, clip, truncated

PAD = 10  # inside a bubble
GAP = 6  # between bubbles
SIDE = 12  # bubble to view edge


class RowHeights:
    def __init__(self) -> None:
        self._known: dict[tuple[str, int], tuple[int, int]] = {}  # -> (width, height)
        self._shapes: dict[str, tuple[int, bool, tuple[int, ...], bool]] = {}  # one per row

    def height(self, row: Row, width: int, fm: QFontMetrics) -> int:
        """The row's height at `width` (not the streaming row's: it grows by its own rule)."""
        key = (row.key, row.version)
        known = self._known.get(key)
        if known is not None and known[0] == width:
            return known[1]
        height = self.estimate(row, width, fm)
        self._known[key] = (width, height)  # one entry per row: resizing never piles up
        return height

    def heights(self, rows: list[Row], width: int, fm: QFontMetrics,
                streaming: Callable[[Row], int]) -> list[int]:
        """`height` for many rows at once, the width's metrics worked out once; the
        streaming row's from `streaming`."""
        line_h, per_line = _metrics(width, fm)
        known_heights, shape = self._known, self._shape
        out = []
        for row in rows:
            if row.kind is RowKind.STREAMING:
                out.append(streaming(row))
                continue
            key = (row.key, row.version)
            known = known_heights.get(key)
            if known is not None and known[0] == width:
                out.append(known[1])
                continue
            lengths, footer = shape(row)
            height = _estimated(lengths, footer, line_h, per_line)
            known_heights[key] = (width, height)
            out.append(height)
        return out

    def note(self, row: Row, width: int, height: int) -> bool:
        """The row was laid out at `width` and is `height` tall; True when that is news."""
        key = (row.key, row.version)
        if self._known.get(key) == (width, height):
            return False
        self._known[key] = (width, height)
        return True

    def estimate(self, row: Row, width: int, fm: QFontMetrics) -> int:
        lengths, footer = self._shape(row)
        return _estimated(lengths, footer, *_metrics(width, fm))

    def forget(self) -> None:
        self._known.clear()
        self._shapes.clear()

    def _shape(self, row: Row) -> tuple[tuple[int, ...], bool]:
        """The lengths of the lines the row shows (clipped as the layout clips them, so the
        estimate agrees) and whether it has a footer; kept per row version."""
        known = self._shapes.get(row.key)
        if known is not None and known[:2] == (row.version, row.expanded) and \
                row.kind is not RowKind.STREAMING:
            return known[2], known[3]
        body = body_text(row)
        shown, hidden = clip(row, body)
        footer = row.kind is RowKind.ERROR or hidden > 0 or (row.expanded and truncated(row, body))
        lengths = tuple(len(part) for part in shown.split("\n"))
        if row.kind is not RowKind.STREAMING:
            self._shapes[row.key] = (row.version, row.expanded, lengths, footer)
        return lengths, footer


def _metrics(width: int, fm: QFontMetrics) -> tuple[int, int]:
    """(line height, characters per line) of a row's text at `width`."""
    text_w = max(50, width - 2 * SIDE - 2 * PAD)
    return fm.lineSpacing(), max(10, text_w // max(1, fm.averageCharWidth()))


def _estimated(lengths: tuple[int, ...], footer: bool, line_h: int, per_line: int) -> int:
    """A row's estimated height: its header, its lines wrapped at `per_line`, its footer."""
    if len(lengths) == 1:
        lines = max(1, -(-lengths[0] // per_line))
    else:
        lines = sum(max(1, -(-n // per_line)) for n in lengths)
    return 2 * PAD + line_h + 4 + int(lines * line_h * 1.15) + (line_h if footer else 0) + GAP

"""Every mark the transcript and the run panel draw is a glyph the window's own font has (an
emoji such as ✋ was an empty box on a machine without an emoji font)."""

from __future__ import annotations

import inspect

import pytest
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

import ui.run_panel
import ui.transcript_text

pytestmark = pytest.mark.gui


def test_every_mark_is_in_the_windows_font(qapp: QApplication) -> None:
    fm = QFontMetrics(qapp.font())
    source = inspect.getsource(ui.transcript_text) + inspect.getsource(ui.run_panel)
    marks = {c for c in source if ord(c) > 0x2000 and c not in "“”‘’—–…·"}
    assert marks  # ★ ⊘ ✓ ✗ ✕ ▸ ▶ ■ ⚠ ⚙ ∑ ○ ↷ and the spinner's frames
    missing = sorted(f"{c} U+{ord(c):04X}" for c in marks if not fm.inFontUcs4(ord(c)))
    assert missing == []

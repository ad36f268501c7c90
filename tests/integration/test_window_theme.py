"""Light and dark: every colour we draw comes from ui/palette.py, readable in both (contrast),
View → Theme switches at once and is remembered."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage
from pytestqt.qtbot import QtBot

from core.model import ConversationMessage
from core.settings import SettingsStore
from core.store.project import Project
from tests.helpers.gui import open_window
from ui import palette

pytestmark = pytest.mark.gui


def luminance(colour: str | QColor) -> float:
    c = QColor(colour)

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize("p", [palette.LIGHT, palette.DARK], ids=["light", "dark"])
def test_every_text_colour_is_readable_on_what_it_is_drawn_on(p: palette.Palette) -> None:
    for background in [p.base, *p.rows.values(), p.code_bg]:
        assert contrast(p.text, background) >= 7.0, background
        assert contrast(p.muted, background) >= 4.5, background
        assert contrast(p.link, background) >= 4.5, background
    assert contrast(p.faint, p.base) >= 4.5
    assert contrast(p.error_text, p.rows["error"]) >= 4.5
    assert contrast(p.text, p.found_bg) >= 4.5
    for bg, _border, text in p.notices.values():
        assert contrast(text, bg) >= 7.0
    for state in ("normal", "warning", "over", "pending"):
        assert contrast(p.meter[state], "#f0f0f0" if p.name == "light" else "#202024") >= 4.5


def mean_luminance(image: QImage) -> float:
    total, n = 0.0, 0
    for y in range(0, image.height(), 7):
        for x in range(0, image.width(), 7):
            total += luminance(image.pixelColor(x, y))
            n += 1
    return total / n


def test_view_theme_switches_at_once_and_is_remembered(qtbot: QtBot, project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create("Colours")
        p.conversations.append_many(conv.id, [
            ConversationMessage(role="user", content="Show me some code."),
            ConversationMessage(role="assistant", content="```python\nx = 1\n```\nThere.")])
    SettingsStore().save(SettingsStore().load().model_copy(update={"theme": "light"}))
    window, controller = open_window(qtbot, project_dir)
    window.resize(900, 600)
    qtbot.wait(50)
    light = mean_luminance(window.transcript.viewport().grab().toImage())
    assert light > 0.75 and palette.current() is palette.LIGHT
    window.theme_actions["dark"].trigger()
    qtbot.wait(50)
    dark = mean_luminance(window.transcript.viewport().grab().toImage())
    assert dark < 0.1 and palette.current() is palette.DARK
    assert window.theme_actions["dark"].isChecked()
    assert SettingsStore().load().theme == "dark"
    window.close()
    window2, _controller2 = open_window(qtbot, project_dir)  # the next start: dark again
    assert palette.current() is palette.DARK and window2.theme_actions["dark"].isChecked()
    window2.theme_actions["system"].trigger()
    assert SettingsStore().load().theme is None

"""The Inspector's decisions table as painted: each cell's text, left-out entries in grey, and
one call into Python per painted cell (a table that asks role by role makes the window wait for
the GIL on each call while the meter builds on its thread)."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QColor

from ui.inspector import COLUMNS, DecisionModel, InspectorPanel

pytestmark = pytest.mark.gui

ROWS = [(1, "a1", "kept", "user", 12, 12, "", "fits the budget"),
        (2, "a2", "dropped", "tool", 900, 0, "", "over budget"),
        (3, "a3", "previewed", "tool", 4000, 120, "tool outputs", "older than 3 rounds")]


class CountingModel(DecisionModel):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def data(self, index: Any, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        self.calls.append("data")
        return super().data(index, role)

    def multiData(self, index: Any, span: Any, /) -> None:
        self.calls.append("multiData")
        super().multiData(index, span)


def test_the_painted_cells_carry_each_decision(qtbot: Any) -> None:
    panel = InspectorPanel()
    qtbot.addWidget(panel)
    model = CountingModel()
    panel.model = model
    panel.table.setModel(model)
    panel.resize(700, 600)
    panel.show()
    panel.show_request("header", [("history", 10)], list(ROWS))
    qtbot.waitExposed(panel)
    model.calls.clear()
    panel.table.grab()  # paints the table as on screen
    cells = len(ROWS) * len(COLUMNS)
    assert model.calls.count("multiData") == cells  # one call per painted cell
    assert "data" not in model.calls
    texts = [[model.index(r, c).data() for c in range(len(COLUMNS))] for r in range(len(ROWS))]
    assert texts[0] == ["1", "kept", "user", "12", "", "fits the budget"]
    assert texts[2][3] == "4,000 → 120" and texts[2][4] == "tool outputs"
    grey = model.index(1, 1).data(Qt.ItemDataRole.ForegroundRole)
    assert isinstance(grey, QColor) and grey.name() == "#71717a"
    assert model.index(0, 1).data(Qt.ItemDataRole.ForegroundRole) is None
    assert model.index(1, 5).data(Qt.ItemDataRole.ToolTipRole) == "over budget"
    assert not model.index(len(ROWS), 0).isValid() and not model.index(0, len(COLUMNS)).isValid()
    assert not model.index(0, 0, model.index(0, 0)).isValid()  # a table: no children
    assert model.rowCount(QModelIndex()) == len(ROWS)

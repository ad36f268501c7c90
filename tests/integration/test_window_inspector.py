"""The Context Inspector panel: the next request's decisions, the same as `workbench context
--json` entry by entry; a filter; a click that shows the entry in the transcript."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from core.llm.runtime import load_litellm
from core.llm.tokens import TokenCounter
from core.store.project import Project
from tests.helpers.fake_llm import FakeLLMServer
from tests.helpers.gui import open_window, use_fake_provider
from tests.helpers.trajectories import make_agent_session

pytestmark = pytest.mark.gui
COUNTER = TokenCounter("o200k_base")


@pytest.fixture(autouse=True)
def provider(monkeypatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    return use_fake_provider(monkeypatch, llm_server, context_window="12000")


def test_the_panel_agrees_with_the_cli_filters_and_shows_the_entry(qtbot, qloop, capsys,
                                                                   project_dir) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create("long").id
        p.conversations.append_many(conv, [COUNTER.with_count(m)
                                           for m in make_agent_session(12, seed=6)])
    assert main(["context", str(project_dir), "-c", conv, "--json"]) == 0
    cli_entries = json.loads(capsys.readouterr().out)["report"]["entries"]
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    panel = window.inspector
    assert not panel.isVisible()
    window.inspector_action.trigger()  # View > Context Inspector (Ctrl+I)
    qtbot.waitUntil(lambda: panel.isVisible() and bool(panel.rows()), timeout=5000)
    shown = {r[1]: r[2] for r in panel.rows()}
    assert shown == {e["id"]: e["decision"] for e in cli_entries}
    assert {"kept", "digested", "synthetic"} <= set(shown.values())
    assert {"previewed", "referenced"} & set(shown.values())
    assert "usable tokens" in panel.header.text() and "compaction" in panel.header.text()
    assert [name for name, _ in panel.bar.parts] == ["system", "tools", "summary", "history",
                                                     "reserved", "free"]
    panel.filter.setCurrentIndex(panel.filter.findText("only digested"))
    digested = panel.rows()
    assert digested and all(r[2] == "digested" for r in digested)
    # clicking a decision shows that entry in the transcript
    target = digested[len(digested) // 2]
    panel.table.clicked.emit(panel.model.index(len(digested) // 2, 1))
    current = window.transcript.currentIndex()
    assert current.isValid()
    row = window.transcript_model.row(current.row())
    assert target[1] in (row.message.id, row.result.id if row.result else None)
    window.inspector_action.trigger()
    assert not panel.isVisible()

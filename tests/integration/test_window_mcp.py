"""MCP tools in the window: the Inspector lists every tool offered with its schema's tokens,
ours and each server's; unticking a tool or a whole server takes exactly those out of the next
request, for this conversation; and the servers stop with the window."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from core.store.project import Project
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from tests.integration.test_mcp import configure, stdio
from ui.approval_dialog import ApprovalDialog
from ui.inspector import InspectorPanel

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    return use_fake_provider(monkeypatch, llm_server)


def heads(panel: InspectorPanel) -> dict[str, QTreeWidgetItem]:
    return {present(panel.tools.topLevelItem(i)).text(0): present(panel.tools.topLevelItem(i))
            for i in range(panel.tools.topLevelItemCount())}


def tree(panel: InspectorPanel) -> dict[str, list[str]]:
    out = {}
    for i in range(panel.tools.topLevelItemCount()):
        head = present(panel.tools.topLevelItem(i))
        out[head.text(0)] = [f"{present(head.child(k)).text(0)}:{present(head.child(k)).text(1)}"
                             for k in range(head.childCount())]
    return out


def test_the_inspector_lists_and_switches_the_servers_tools(qtbot: QtBot,
                                                            qloop: asyncio.AbstractEventLoop,
                                                            project_dir: Path,
                                                            llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    configure(project_dir, calc=stdio())
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    window.mode_switcher.buttons["agent"].click()
    window.inspector_action.trigger()
    llm_server.script(Answer("ready"))
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: not controller.busy())
    sent = [t["function"]["name"] for t in llm_server.requests[-1].body["tools"]]
    assert "calc__add" in sent  # started by the first agent turn
    panel = window.inspector
    qtbot.waitUntil(lambda: "calc" in tree(panel), timeout=5000)
    shown = tree(panel)
    assert [x.split(":")[0] for x in shown["calc"]] == [n for n in sent if n.startswith("calc")]
    report = controller.meter.report
    assert report is not None
    tokens = dict(report.tools_offered)
    assert f"calc__add:{tokens['calc__add']:,}" in shown["calc"]
    assert "read_file" in [x.split(":")[0] for x in shown["Context Workbench"]]
    # untick one tool: only it leaves the next request
    head = next(present(panel.tools.topLevelItem(i)) for i in range(panel.tools.topLevelItemCount())
                if present(panel.tools.topLevelItem(i)).text(0) == "calc")
    hang = next(present(head.child(k)) for k in range(head.childCount())
                if present(head.child(k)).text(0) == "calc__hang")
    hang.setCheckState(0, hang.checkState(0).__class__.Unchecked)
    qtbot.waitUntil(lambda: "calc__hang" not in dict(
        present(controller.meter.report).tools_offered), timeout=5000)
    after = [n for n, _ in present(controller.meter.report).tools_offered]
    assert after == [n for n in sent if n != "calc__hang"]
    qtbot.waitUntil(lambda: "calc__hang:off" in tree(panel).get("calc", []), timeout=5000)
    # against the request sent: the tools before the messages changed, so no stable prefix
    qtbot.waitUntil(lambda: "the tools offered changed" in panel.header.text(), timeout=5000)
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.meta(present(controller.current_id)).tools_off == ["calc__hang"]
    # the whole server off, then on again
    head = next(present(panel.tools.topLevelItem(i)) for i in range(panel.tools.topLevelItemCount())
                if present(panel.tools.topLevelItem(i)).text(0) == "calc")
    head.setCheckState(0, head.checkState(0).__class__.Unchecked)
    qtbot.waitUntil(lambda: not any(n.startswith("calc__")
                                    for n, _ in present(controller.meter.report).tools_offered),
                    timeout=5000)
    head = next(present(panel.tools.topLevelItem(i)) for i in range(panel.tools.topLevelItemCount())
                if present(panel.tools.topLevelItem(i)).text(0) == "calc")
    head.setCheckState(0, head.checkState(0).__class__.Checked)
    qtbot.waitUntil(lambda: [n for n, _ in present(controller.meter.report).tools_offered] == sent,
                    timeout=5000)
    qtbot.waitUntil(lambda: "a stable prefix of" in panel.header.text(), timeout=5000)
    assert "the tools offered changed" not in panel.header.text()


def test_settings_list_the_servers_with_their_state_and_restart_one(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    configure(project_dir, calc=stdio(), broken={"command": "/nonexistent/server"})
    window, controller = open_window(qtbot, project_dir)
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None

    def lines() -> list[str]:
        assert dialog is not None
        return [present(dialog.mcp_servers.item(i)).text()
                for i in range(dialog.mcp_servers.count())]

    assert lines() == ["broken — not started", "calc — not started"]
    assert "does not sandbox it" in dialog.mcp_note.text()
    dialog.reject()
    controller.new_conversation()
    window.mode_switcher.buttons["agent"].click()
    llm_server.script(Answer("ready"))
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: not controller.busy())
    window.inspector_action.trigger()  # a server that offers nothing says why
    qtbot.waitUntil(lambda: "broken" in heads(window.inspector), timeout=5000)
    broken = heads(window.inspector)["broken"]
    assert broken.text(1) == "failed" and "the command was not found" in broken.toolTip(0)
    assert broken.checkState(0) == broken.checkState(0).__class__.Unchecked
    assert not broken.data(0, 10)  # no check box: nothing to switch
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: "calc — ready with 6 tools" in lines(), timeout=5000)
    assert lines()[0].startswith("broken — failed: the command was not found")
    dialog.mcp_servers.setCurrentRow(1)
    dialog.mcp_restart.click()
    qtbot.waitUntil(lambda: "calc — ready with 6 tools" in lines(), timeout=30_000)
    assert controller.engine is not None
    hub = controller.engine.context.mcp
    assert hub is not None
    assert hub.servers["calc"].status == "ready"
    dialog.reject()


def test_stop_cancels_a_running_server_call(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                            project_dir: Path, llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import ToolCalls

    project_dir.mkdir()
    configure(project_dir, calc=stdio(autoApproveReadOnly=True))
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    window.mode_switcher.buttons["agent"].click()
    llm_server.script(ToolCalls([("c1", "calc__hang", "{}")]))
    type_and_send(qtbot, window, "wait")

    def asked() -> ApprovalDialog | None:
        found = [d for d in window.findChildren(ApprovalDialog) if d.isVisible()]
        return found[0] if found else None

    run_until(qloop, lambda: asked() is not None)  # not read-only: it asks first
    dialog = asked()
    assert dialog is not None
    assert "runs with your rights, outside Context Workbench's sandbox" in dialog.detail.toPlainText()
    next(iter(dialog.buttons.values())).click()  # allow it once
    qtbot.waitUntil(lambda: any(r.running_since is not None
                                for r in window.transcript_model.rows()), timeout=30_000)
    controller.stop()  # while the server sleeps
    run_until(qloop, lambda: not controller.busy())
    with Project.open(project_dir, read_only=True) as p:
        results = [m for m in p.conversations.load(present(controller.current_id)).messages
                   if m.role == "tool"]
    assert results and results[0].status == "aborted"

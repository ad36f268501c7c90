"""Figures the user reads stay what they said (issue 51, finding 13): a summary's size and
AGENTS.md's size do not move when the calibration against the provider's counts does (a
calibrated figure says it is one), and one draft has one count wherever the window shows it:
the meter, the held paste's line, a refusal and the Inspector."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.engine import CompactionFinished
from core.llm.runtime import load_litellm
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, summary_text
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.trajectories import agent_session_project
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui
SUMMARY = summary_text("Parsers keep line numbers.")


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    use_fake_provider(monkeypatch, llm_server, context_window="16000",
                      max_output_tokens="800", auto_summary="0",
                      summary_model="openai/summary-model")
    # the summary model's window (the server says so) reads the whole log in one call
    llm_server.info["/v1/models"] = {"data": [{"id": "summary-model", "max_model_len": 128_000}]}
    return llm_server


def recalibrated(qloop: asyncio.AbstractEventLoop, controller: Controller, ours: int,
                 theirs: int) -> float:
    """The provider's count of a request moves the calibration; the meter follows."""
    factor = controller.calibration.observe(MODEL, ours, theirs)
    controller.refresh_usage()
    run_until(qloop, lambda: controller.meter.report is not None
              and controller.meter.report.calibration == factor)
    return factor


def summaries(window: MainWindow) -> list[tuple[str, str]]:
    history = window.inspector.history
    return [(history.item(n).text(), history.item(n).toolTip()) for n in range(history.count())]


def test_a_summary_s_size_and_agents_md_s_read_the_same_after_calibration_moves(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    conv = agent_session_project(project_dir, 12, 4, "long session")
    (project_dir / "AGENTS.md").write_text("Always answer in French. " * 20, encoding="utf-8")
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    window.inspector_action.trigger()
    factor = recalibrated(qloop, controller, 10_000, 11_000)  # calibrated before it is written
    done: list[CompactionFinished] = []
    controller.compaction.finished.connect(done.append)
    llm_server.script(Answer(SUMMARY))
    type_and_send(qtbot, window, "/compact")
    run_until(qloop, lambda: bool(done) and not controller.compaction.running())
    assert done[0].status == "ok", done[0].message
    size = done[0].tokens_after
    notice = window.notice_label.text()
    assert f"{size:,}-token summary" in notice
    calibrated = f"calibrated against the provider's counts: x{factor:.3f}"
    assert calibrated in notice  # the notice says its figures are calibrated
    panel = window.inspector
    qtbot.waitUntil(lambda: len(summaries(window)) == 1 and "entries" in summaries(window)[0][0])
    line, tip = summaries(window)[0]
    assert line.endswith(f" · {size:,} tokens")
    assert "when it was written" in tip and calibrated in tip
    switch, switch_tip = panel.instructions.text(), panel.instructions.toolTip()
    assert re.fullmatch(r"AGENTS\.md · [\d,]+ tokens", switch)
    assert "calibrated" in switch_tip
    share = dict(panel.bar.parts)["instructions"]  # the request's share: calibrated, it moves

    recalibrated(qloop, controller, 10_000, 6_000)  # the provider counts much less now
    qtbot.waitUntil(lambda: dict(panel.bar.parts)["instructions"] < share)
    assert summaries(window)[0] == (line, tip)  # as it was measured
    assert panel.instructions.text() == switch  # the file's size, not the request's share


def count_in(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in {text!r}"
    return int(found.group(1).replace(",", ""))


def test_one_pasted_draft_has_one_count_in_the_meter_the_paste_s_line_a_refusal_and_the_inspector(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    recalibrated(qloop, controller, 10_000, 12_000)
    window.inspector_action.trigger()
    window.composer._hold(("word " * 5 + "\n") * 70_000)  # 1.8 MB: held aside as a paste
    qtbot.keyClicks(window.composer.editor, "see below")  # typed while the paste is counted
    qtbot.waitUntil(lambda: not controller.meter.draft_estimated(), timeout=20_000)
    controller.refresh_usage()
    run_until(qloop, lambda: "your draft" in window.usage.toolTip())
    meter = count_in(r"your draft</td><td align='right'>&nbsp;&nbsp;([\d,]+)",
                     window.usage.toolTip())
    held = count_in(r"comes to ([\d,]+) tokens", window.composer.held_label.text())
    qtbot.waitUntil(lambda: "your latest message" in window.inspector.header.text(),
                    timeout=10_000)
    inspector = count_in(r"your latest message ([\d,]+)", window.inspector.header.text())
    report = controller.meter.report
    assert report is not None  # the Inspector counts against the meter's budget, calibrated too
    assert f"only {report.usable:,} are available" in window.inspector.header.text()
    controller.send(window.composer.text())
    refusal = count_in(r"this message alone is ([\d,]+) tokens", window.composer.hint.text())
    assert meter == held == inspector == refusal
    assert not llm_server.requests

"""Run mode: what a run-mode request costs over a chat-mode one on a 10,000-message log (the
run's state replayed from the log, the directive and brief composed, the step's tools)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from core.context.service import ProjectContext
from core.model import ConversationMessage, RunEvent, new_id
from core.settings import LLMSettings
from core.store.project import Project
from core.workflows.state import replay
from core.workflows.workflow import Workflow
from tests.bench.common import big_messages, median, project_with, report

WORKFLOW = Workflow.model_validate({"name": "Bench", "steps": [
    {"id": f"s{n}", "title": f"Step {n}", "brief": f"Do part {n} of the work carefully."}
    for n in range(1, 6)]})


def run_log(count: int = 10_000) -> list[ConversationMessage]:
    """A long conversation that is one run: started at the top, every entry tagged."""
    run_id = new_id()
    start = ConversationMessage(role="user", content="Run the workflow 'Bench'.", mode="run",
                                run_id=run_id, step_id="s1", run_event=RunEvent(
                                    action="start", workflow=WORKFLOW.model_dump(mode="json")))
    tagged = [m.model_copy(update={"run_id": run_id, "step_id": "s1", "mode": "run"})
              for m in big_messages(count - 1)]
    return [start, *tagged]


def run() -> None:
    print("run mode")
    history = run_log()
    t = time.perf_counter()
    state = replay(history)
    report("replay a run's state from 10,000 entries (cold)", (time.perf_counter() - t) * 1000,
           "ms")
    assert state is not None and state.active is not None
    settings = LLMSettings(model="gpt-4o", max_output_tokens=4096, context_window=128_000)
    with tempfile.TemporaryDirectory() as tmp:
        conv = project_with(Path(tmp) / "p", history)
        with Project.open(Path(tmp) / "p") as project:
            service = ProjectContext(project.conversations, offer_tools=True)
            log = project.conversations.load(conv).messages
            figures: dict[str, float] = {}
            for mode in ("chat", "run"):
                service.build(conv, log, settings, mode)  # warm: counts, cache, run tracker
                times = []
                for i in range(7):
                    extra = ConversationMessage(role="user", content=f"q {mode} {i}",
                                                mode=mode)
                    log = [*log, service.counter("gpt-4o").with_count(extra)]
                    t = time.perf_counter()
                    built = service.build(conv, log, settings, mode)
                    times.append((time.perf_counter() - t) * 1000)
                figures[mode] = median(times)
                if mode == "run":
                    assert "NODE_BRIEF" in built.messages[0]["content"]
            report("build after an append, chat mode (10,000 messages)", figures["chat"], "ms")
            report("build after an append, run mode (10,000 messages)", figures["run"], "ms")
            report("  run mode's extra cost per request", figures["run"] - figures["chat"], "ms",
                   "< 5 ms")

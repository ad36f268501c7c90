"""A run's progress on the terminal: each step as it becomes active or ends, and why the run
stopped, with the command that carries it on (`workbench run`, and `send` in a run)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.term import for_stream

if TYPE_CHECKING:  # the engine (litellm behind it) is imported when a run starts
    from core.engine import EngineEvent
    from core.workflows.state import RunState


def run_progress(final: list[RunState], project: Path | None = None, conv: str = ""
              ) -> Callable[[EngineEvent, Callable[[str], None]], None]:
    """Print each step as it becomes active or ends, and why the run stopped, with the
    command that carries it on."""
    from core.engine import RunUpdated
    from core.workflows.state import ICON

    shown: dict[str, str] = {}

    def on_event(event: EngineEvent, note: Callable[[str], None]) -> None:
        if not isinstance(event, RunUpdated) or event.state is None:
            return
        run = event.state
        for n, s in enumerate(run.steps, 1):
            if shown.get(s.step.id) == s.status or s.status == "pending":
                continue
            shown[s.step.id] = s.status
            result = f": {' '.join(s.result.split())[:160]}" if s.result else ""
            note(for_stream(f"workbench: {ICON[s.status]} step {n}/{len(run.steps)} "
                            f"{s.step.title} — {s.status}{result}", sys.stderr))
        if event.stopped is not None:
            final.append(run)
            note(f"workbench: {_stopped(run, project, conv)}")

    return on_event


def _stopped(run: RunState, project: Path | None, conv: str) -> str:
    """Why the run stopped, and what carries it on from the command line."""
    where = f"{project or 'PROJECT'} --conversation {conv[:12] or 'ID'}"
    resume = f"`workbench run {where} --resume` carries it on at the step"
    return {
        "finished": "The workflow is complete.",
        "aborted": "The run was aborted.",
        "paused": f"The run is paused; {resume}.",
        "waiting": "The model stopped without completing the step. Answer it with `workbench "
                   f"send {where} \"...\"` (the step goes on), or {resume}.",
        "limit": f"The step reached its limit of tool rounds; {resume}.",
        "failed": f"The step's request failed; once the cause is fixed, {resume}.",
    }.get(run.status, f"The run stopped ({run.status}); {resume}.")

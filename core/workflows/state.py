"""A run's state, read from the conversation log alone.

The log is the run's only source of truth: the start entry carries the workflow as started,
control entries (pause, resume, skip, redo, abort) say what the user did, and the model's
successful complete_step results say which steps are done and with what result. Every entry a
run produces is tagged with its `run_id` and `step_id`. `replay` reads them in order; the run
file in `.workbench/runs/` is only a cache of the result (see core.workflows.run_files).

Statuses of a run:
    running    a step is active and nothing stands in its way
    waiting    the model answered without completing the step (it may need the user)
    limit      the step used its rounds of tool calls (Continue lets it go on)
    failed     the step's last request failed (Continue or Retry carries on at the step)
    paused     the user paused (or stopped) it; Resume carries on
    post_run   every step is done or skipped: one more request writes the wrap-up
    finished   the wrap-up is written
    aborted    the user aborted it
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from core.model import ConversationMessage
from core.tool_names import COMPLETE_STEP
from core.workflows.workflow import Step, Workflow, WorkflowError, validate_workflow

StepStatus = Literal["pending", "active", "done", "skipped", "failed"]
RunStatus = Literal["running", "waiting", "limit", "failed", "paused", "post_run", "finished",
                    "aborted"]
OPEN = ("running", "waiting", "limit", "failed", "paused", "post_run")  # can carry on
RESULT_LINE = 160  # characters of a result in the directive's step list
ICON = {"pending": "○", "active": "▶", "done": "✓", "skipped": "↷", "failed": "✗"}


@dataclass(frozen=True)
class RunContext:
    """What run mode's prefix says of the active workflow (`RunState.context`; the prompt
    templates of core.context.prompts fill in its fields).

    Attributes:
        workflow_title: the workflow's name; goal: what the run is for.
        step_number, step_count: position of the active step (1-based).
        step_id, step_title, brief, done_when: the active step's own text.
        steps: the directive's list of steps with their status and one-line results.
        step_context: the results of the steps the active one depends on.
        complete: every step is done; only the post-run protocol applies.
    """

    workflow_title: str
    goal: str = ""
    step_number: int = 0
    step_count: int = 0
    step_id: str = ""
    step_title: str = ""
    brief: str = ""
    done_when: str = ""
    steps: str = ""
    step_context: str = ""
    complete: bool = False


@dataclass
class StepState:
    """Attributes:
        rounds: rounds of tool calls since the step started, was redone or last hit its limit.
        tokens: what its requests and answers cost (as the provider reported).
        error: the last failure's message while the step is failed.
    """

    step: Step
    status: StepStatus = "pending"
    result: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None
    tokens: int = 0
    rounds: int = 0
    error: str = ""
    busy_ms: int = 0  # time its requests and tools took (not pauses, not a closed app)

    def elapsed_s(self) -> float:
        """Seconds the step has been worked on: its answers' and tools' own durations."""
        return self.busy_ms / 1000


@dataclass
class RunState:
    run_id: str
    workflow: Workflow
    goal: str
    steps: list[StepState]
    status: RunStatus = "running"
    started_at: datetime | None = None
    entries: int = 0  # log entries tagged with the run
    last_entry: str = ""  # id of the last of them (the run file is stale when it differs)
    # entries of the log that contradict the run (not obeyed), one sentence each
    problems: list[str] = field(default_factory=list)
    _calls: dict[str, str] = field(default_factory=dict, repr=False)  # call id -> result

    @property
    def active(self) -> StepState | None:
        return next((s for s in self.steps if s.status in ("active", "failed")), None)

    @property
    def open(self) -> bool:
        return self.status in OPEN

    def snapshot(self) -> RunState:
        """A copy that later replays of this state do not change (the workflow is immutable,
        shared)."""
        return replace(self, steps=[replace(s) for s in self.steps], _calls=dict(self._calls),
                       problems=list(self.problems))

    def step(self, step_id: str) -> StepState | None:
        return next((s for s in self.steps if s.step.id == step_id), None)

    def tags(self) -> dict[str, str | None]:
        """What an entry produced now belongs to."""
        active = self.active
        return {"run_id": self.run_id, "step_id": active.step.id if active else None}

    def context(self) -> RunContext:
        """What the run-mode prefix says: the directive and, while a step is active, its
        brief. Only what changes at a step's boundary goes in (no times, no counters), so the
        prefix stays byte-identical while a step runs."""
        wf = self.workflow
        title = wf.name
        goal = self.goal or wf.description or "(not stated)"
        if self.status in ("post_run", "finished") or self.active is None:
            return RunContext(workflow_title=title, goal=goal, complete=True)
        active = self.active
        number = self.steps.index(active) + 1
        lines = []
        for n, s in enumerate(self.steps, 1):
            status = "active" if s is active else s.status
            line = f"{n}. [{status}] {s.step.title} (id {s.step.id})"
            if s.result:
                one = " ".join(s.result.split())
                line += ": " + (one if len(one) <= RESULT_LINE else one[:RESULT_LINE - 1] + "…")
            lines.append(line)
        context = []
        for dep in wf.depends_on(active.step.id):
            dep_state = self.step(dep)
            if dep_state is not None and dep_state.result:
                context.append(f"Result of {dep_state.step.title} ({dep}):\n{dep_state.result}")
        return RunContext(
            workflow_title=title, goal=goal, step_number=number, step_count=len(self.steps),
            step_id=active.step.id, step_title=active.step.title, brief=active.step.brief,
            done_when=active.step.done_when, steps="\n".join(lines),
            step_context="\n\n".join(context) or "(no earlier results)")

    def to_json(self) -> dict[str, Any]:
        def when(t: datetime | None) -> str | None:
            return t.isoformat() if t is not None else None

        return {
            "run_id": self.run_id, "workflow": self.workflow.model_dump(mode="json"),
            "goal": self.goal, "status": self.status, "started_at": when(self.started_at),
            "entries": self.entries, "last_entry": self.last_entry,
            "steps": [{"id": s.step.id, "title": s.step.title, "status": s.status,
                       "result": s.result, "started_at": when(s.started_at),
                       "finished_at": when(s.finished_at), "tokens": s.tokens,
                       "rounds": s.rounds, "error": s.error, "busy_ms": s.busy_ms}
                      for s in self.steps]}


def replay(history: Sequence[ConversationMessage], run_id: str | None = None) -> RunState | None:
    """The state of the conversation's latest run (or of `run_id`), None when it has none."""
    state: RunState | None = None
    for m in history:
        state = apply(state, m, run_id)
    return state


def apply(state: RunState | None, m: ConversationMessage,
          run_id: str | None = None) -> RunState | None:
    """The state after entry `m` (one step of `replay`, so a tracker can replay only what is
    new)."""
    event = m.run_event
    if event is not None and event.action == "start" and m.run_id and (
            run_id is None or m.run_id == run_id):
        started, problem = _started(m)
        if started is None and state is not None:  # the run shown stays the one before it
            state.problems.append(problem)
        return started or state
    if state is None or m.run_id != state.run_id:
        return state
    step = _count(state, m)
    if event is not None:
        if event.step_id is not None and state.step(event.step_id) is None:
            state.problems.append(f"An entry of the log would {event.action} a step the "
                                  f"workflow does not have ({event.step_id!r}); it was not "
                                  "obeyed.")
        else:
            _control(state, event.action, event.step_id, m.created_at)
    elif state.status in ("aborted", "finished"):
        pass
    elif m.kind == "error" and m.error is not None:
        _failed(state, step, m.error.type, m.error.message)
    else:
        _worked(state, step, m)
    return state


def _worked(state: RunState, step: StepState | None, m: ConversationMessage) -> None:
    """An answer, a tool result or the user's message in an open run."""
    if step is not None and step.status == "failed":
        step.status, step.error = "active", ""
    if m.role == "assistant":
        _answered(state, step, m)
    elif m.role == "tool" and m.tool_name == COMPLETE_STEP and m.status in ("ok", None):
        active = state.active
        if active is not None and step is active:
            _finish(state, active, "done", state._calls.get(m.tool_call_id or "", "") or
                    m.text(), m.created_at)
    elif m.role == "user" and state.status in ("waiting", "failed", "limit"):
        # the user answered: the step goes on (or, with every step done, the wrap-up)
        state.status = "post_run" if state.active is None else "running"


def _count(state: RunState, m: ConversationMessage) -> StepState | None:
    """Count `m` into the run and the step it is tagged with (returned, if any)."""
    state.entries += 1
    state.last_entry = m.id
    step = state.step(m.step_id) if m.step_id else None
    if step is not None:
        step.updated_at = m.created_at
        if m.usage:
            step.tokens += int(m.usage.get("prompt_tokens") or 0) + \
                int(m.usage.get("completion_tokens") or 0)
        if m.duration_ms:
            step.busy_ms += m.duration_ms
    return step


def _failed(state: RunState, step: StepState | None, kind: str, message: str) -> None:
    """A failed (or stopped, or step-limited) answer of the run."""
    if state.active is None or step is None:  # the wrap-up failed, or an untagged answer
        state.status = "paused" if kind == "stopped" else "failed"
    elif kind in ("step_limit", "cost_cap"):
        state.status, step.rounds = "limit", 0
    elif kind == "stopped":
        state.status = "paused"
    else:
        state.status, step.error = "failed", message
        if step.status == "active":
            step.status = "failed"


def _answered(state: RunState, step: StepState | None, m: ConversationMessage) -> None:
    """An answer of the run: its complete_step calls noted, the run's status moved on."""
    wrapping = state.active is None  # every step is done or skipped: the wrap-up is due
    for call in m.tool_calls or ():
        if call.function.name == COMPLETE_STEP:
            state._calls[call.id] = _result_argument(call.function.arguments)
    if m.tool_calls:
        if step is not None:
            step.rounds += 1
        if state.status != "paused":
            state.status = "post_run" if wrapping else "running"
    elif wrapping and step is None:  # the wrap-up is written (after a failed attempt too)
        state.status = "finished"  # (not the answer of the last step, skipped while it came)
    elif state.status != "paused" and step is not None and step is state.active:
        state.status = "waiting"  # (an answer to a step skipped meanwhile changes nothing)


def _started(m: ConversationMessage) -> tuple[RunState | None, str]:
    """The run `m` starts, or None and why it starts none (a start entry that cannot be read
    starts nothing; the log stays as it is)."""
    event = m.run_event
    assert event is not None and m.run_id is not None
    try:
        workflow = validate_workflow(event.workflow, "the run's workflow")
    except WorkflowError as e:
        return None, (f"An entry of the log starts a run whose workflow cannot be read ({e}); "
                      "it was not obeyed, and the run shown is the one before it.")
    steps = [StepState(s) for s in workflow.steps]
    steps[0].status, steps[0].started_at = "active", m.created_at
    return RunState(m.run_id, workflow, event.goal or "", steps, "running", m.created_at,
                    entries=1, last_entry=m.id), ""


def _control(state: RunState, action: str, step_id: str | None, at: datetime) -> None:
    if action == "abort":
        state.status = "aborted"
        for s in state.steps:  # the step it was on ends there
            if s.status in ("active", "failed"):
                s.status, s.error, s.finished_at = "failed", "the run was aborted here", at
    elif state.status in ("aborted", "finished") and action != "redo":
        return
    elif action == "pause":
        state.status = "paused"
    elif action == "resume":
        state.status = "post_run" if state.active is None else "running"
    elif action == "skip":
        target = state.step(step_id) if step_id else state.active
        if target is not None and target.status in ("pending", "active", "failed"):
            _finish(state, target, "skipped", target.result, at)
    elif action == "redo":
        target = state.step(step_id) if step_id else state.active
        if target is None:
            return
        at_index = state.steps.index(target)
        for s in state.steps[at_index:]:
            s.status, s.result, s.error, s.rounds = "pending", "", "", 0
            s.tokens = s.busy_ms = 0
            s.started_at = s.finished_at = None
        for s in state.steps[:at_index]:  # one active step at a time
            if s.status in ("active", "failed"):
                s.status = "skipped"
        target.status, target.started_at = "active", at
        state.status = "running"


def _finish(state: RunState, step: StepState, status: StepStatus, result: str,
            at: datetime) -> None:
    was_active = step.status in ("active", "failed")
    step.status, step.result, step.finished_at, step.error = status, result, at, ""
    if not was_active:
        return
    at_index = state.steps.index(step)
    following = next((s for s in state.steps[at_index + 1:] if s.status == "pending"), None)
    if following is None:
        following = next((s for s in state.steps if s.status == "pending"), None)
    if following is not None:
        following.status, following.started_at = "active", at
        if state.status not in ("paused",):
            state.status = "running"
    elif state.status != "paused":
        state.status = "post_run"


def _result_argument(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return ""
    result = value.get("result") if isinstance(value, dict) else None
    return result.strip() if isinstance(result, str) else ""


class RunTracker:
    """The latest run's state of one log, replayed only over what was appended since the last
    call (the meter, the engine and the progress panel ask after every entry)."""

    def __init__(self) -> None:
        self._seen = 0  # entries replayed so far ...
        self._last_id = ""  # ... the last of them
        self._state: RunState | None = None

    def state(self, history: Sequence[ConversationMessage],
              remember: bool = True) -> RunState | None:
        """The state after `history`. `remember=False`: a history that is not the log (a
        draft appended for a preview) is replayed on a copy and forgotten, so the next call
        with the log goes on from where the log's last one stopped."""
        n = self._seen
        same = len(history) >= n and (n == 0 or history[n - 1].id == self._last_id)
        state = self._state if same else None
        if not remember:
            state = state.snapshot() if state is not None else None
        for m in history[n if same else 0:]:
            state = apply(state, m)
        if remember:
            self._seen, self._state = len(history), state
            self._last_id = history[-1].id if history else ""
        return state

"""The run driver: starts a run, drives it through its steps turn after turn, and records
what the user does to it (pause, resume, skip, redo, abort).

It keeps nothing of its own: each decision reads the run's state from the log (see
core.workflows.state), so a run interrupted anywhere (a crash, a kill, an error entry, the app
closed) carries on where the log says it is, in this process or the next. The engine does the
requests; the context service gives every run-mode request the directive and the active step's
brief; the driver only decides what to do next:

    the log ends in ...                      the driver (the engine's verb)
    a user message, a tool result, a start   asks for the next answer (proceed)
    an error entry                           continues it (continue_), else runs it again
                                             (retry), else goes on from it (proceed)
    an answer without complete_step          nudges once (proceed, with an instruction
                                             never stored), then waits for the user

`start` appends the run's start entry, then drives (`drive`: the table above, turn after turn);
`send` (the user's message in a run) and `drive_after` (a Continue or Retry in a run) make that
turn first, then drive when it ended well.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import replace

from core.attachments import Attachment
from core.engine import (
    DEFAULT_TURN,
    Engine,
    EngineEvent,
    EntryAppended,
    RunUpdated,
    TurnFinished,
    TurnOptions,
)
from core.last_turn import last_turn
from core.model import ConversationMessage, RunAction, RunEvent, continuable, new_id
from core.settings import LLMSettings
from core.store.errors import StoreWriteError
from core.tool_names import COMPLETE_STEP
from core.workflows.state import RunState
from core.workflows.workflow import Workflow

NUDGE = ("[Run: step {number} ({title}) is still active. Carry on with it; when its done-when "
         "condition holds, call complete_step with the result. If you need something from the "
         "user first, say what and stop.]")
NUDGES = 1  # answers without complete_step before the run waits for the user
MAX_TURNS = 200  # engine turns one drive may take (each is a full tool loop)

STOPPED = {
    "finished": "The workflow is complete.",
    "aborted": "The run was aborted.",
    "paused": "The run is paused; Resume carries on at the active step.",
    "waiting": "The model stopped without completing the step: answer it, or Resume to let it "
               "carry on.",
    "limit": "The step reached its limit of tool rounds; Continue (or Resume) lets it go on.",
    "failed": "The step's request failed; Resume (or Continue) carries on at the step once the "
              "cause is fixed.",
}


class RunControlError(ValueError):
    """A control that does not apply to the run as it stands; says why."""


class RunDriver:
    """Attributes:
        engine: runs the requests and owns the store.
        files: the run files (a cache of each run's state), when the project has a folder.
        nudges: answers without complete_step before the run waits for the user.
    """

    def __init__(self, engine: Engine, nudges: int = NUDGES) -> None:
        self.engine = engine
        self.nudges = nudges

    def state(self, conv_id: str) -> RunState | None:
        return self.engine.context.run_state(conv_id)

    def nudge(self, conv_id: str, run: RunState | None = None) -> str | None:
        """The instruction the run asks with when the model answered without completing its
        step (the run waits): never stored, so Regenerate of the answer that followed it asks
        with it again (core.store.branches.asked_at). None when the run does not wait."""
        run = run if run is not None else self.state(conv_id)
        if run is None or run.status != "waiting" or run.active is None:
            return None
        return NUDGE.format(number=run.steps.index(run.active) + 1, title=run.active.step.title)

    async def start(
        self, conv_id: str, workflow: Workflow, settings: LLMSettings,
        options: TurnOptions = DEFAULT_TURN, goal: str = "",
    ) -> AsyncIterator[EngineEvent]:
        """Record a new run of `workflow` in the conversation and drive it."""
        current = self.state(conv_id)
        if current is not None and current.open and current.status != "post_run":
            raise RunControlError(
                f"The run of {current.workflow.name!r} is still {current.status} in this "
                "conversation; abort it first, or resume it.")
        goal = " ".join(goal.split())
        text = f"Run the workflow {workflow.name!r}" + (f": {goal}" if goal else ".")
        entry = ConversationMessage(
            role="user", content=text, mode="run", run_id=new_id(),
            step_id=workflow.steps[0].id,
            run_event=RunEvent(action="start", workflow=workflow.model_dump(mode="json"),
                               goal=goal or None))
        for event in self.engine.close_interrupted(conv_id):  # calls a crash left unanswered
            yield event  # get their results before the run's first entry, as a message does
        written = self.engine.writer.write(conv_id, [entry], "the run's start")
        for event in written.events:
            yield event
        if not written.ok:
            return
        async for event in self.drive(conv_id, settings, options):
            yield event

    async def send(
        self, conv_id: str, text: str, settings: LLMSettings,
        options: TurnOptions = DEFAULT_TURN, attachments: list[Attachment] | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """The user's message during a run: it joins the active step, which then goes on."""
        options = replace(options, mode="run")
        turn = self.engine.send(conv_id, text, settings, options, attachments)
        async for event in self.drive_after(conv_id, turn, settings, options):
            yield event

    async def drive_after(
        self, conv_id: str, turn: AsyncIterator[EngineEvent], settings: LLMSettings,
        options: TurnOptions = DEFAULT_TURN,
    ) -> AsyncIterator[EngineEvent]:
        """`turn`, one the user started in run mode (a message, a Continue, a Retry), then,
        when it ended well, `drive` from where it leaves the log."""
        options = replace(options, mode="run")
        finished: TurnFinished | None = None
        async for event in self._following(conv_id, turn):
            if isinstance(event, TurnFinished):
                finished = event
            yield event
        if finished is not None and finished.status == "ok":
            async for event in self.drive(conv_id, settings, options, answered=True):
                yield event
        else:
            yield self._updated(conv_id, final=True)

    async def drive(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        answered: bool = False,
    ) -> AsyncIterator[EngineEvent]:
        """Drive the conversation's run from where its log is, one engine turn after another
        (as the module's table says), until it is complete, paused, aborted, waiting for the
        user, or a request fails. `answered`: the turn
        just before already produced an answer (a nudge may follow it)."""
        options = replace(options, mode="run")
        nudged = 0
        for _ in range(MAX_TURNS):
            yield self._updated(conv_id)
            # read after the report: the user may pause (or abort) while it is shown, and no
            # request may leave after that
            run = self.state(conv_id)
            if run is None or run.status in ("finished", "aborted", "paused"):
                break
            end = last_turn(self.engine.store.load(conv_id).messages)
            last = end.last
            instruction = None
            if run.status == "waiting":
                if answered and nudged >= self.nudges:
                    break
                instruction = self.nudge(conv_id, run)
                if instruction is None:
                    break
                nudged += 1
            if last is not None and last.kind == "error" and instruction is None:
                if continuable(last):
                    events = self.engine.continue_(conv_id, settings, options)
                elif end.retryable:
                    events = self.engine.retry(conv_id, settings, options)
                else:
                    events = self.engine.proceed(conv_id, settings, options)
            else:
                events = self.engine.proceed(conv_id, settings, options, instruction)
            finished: TurnFinished | None = None
            async for event in self._following(conv_id, events):
                if isinstance(event, TurnFinished):
                    finished = event
                yield event
            answered = True
            if finished is None or finished.status != "ok":
                break
        yield self._updated(conv_id, final=True)

    def control(self, conv_id: str, action: RunAction, step_id: str | None = None
                ) -> ConversationMessage:
        """Record the user's pause, resume, skip, redo or abort as a control entry (the log
        says it from then on) and return it; the caller resumes driving after a resume,
        skip or redo.

        Raises:
            RunControlError: the conversation has no run, or the action does not apply now.
        """
        run = self.state(conv_id)
        if run is None:
            raise RunControlError("This conversation has no run; start one with a workflow.")
        target = run.step(step_id) if step_id else run.active
        if step_id and target is None:
            raise RunControlError(f"The workflow has no step {step_id!r}.")
        name = f"step {run.steps.index(target) + 1} ({target.step.title})" if target else ""
        if action == "redo":
            if target is None:
                raise RunControlError("Which step should be redone? Name one.")
            text = f"Run: {name} is redone; the steps after it start over."
        elif run.status in ("finished", "aborted"):
            raise RunControlError(f"The run of {run.workflow.name!r} is {run.status}; only "
                                  "redoing a step starts it again.")
        elif action == "pause":
            if run.status == "paused":
                raise RunControlError("The run is already paused.")
            text = "Run paused by you."
        elif action == "resume":
            text = "Run resumed."
        elif action == "skip":
            if target is None or target.status not in ("pending", "active", "failed"):
                raise RunControlError(f"There is no step to skip{' there' if step_id else ''}:"
                                      " it is already " + (target.status if target else
                                                           "finished") + ".")
            text = f"Run: {name} skipped by you."
        elif action == "abort":
            text = "Run aborted by you."
        else:
            raise RunControlError(f"Unknown run action {action!r}.")
        entry = ConversationMessage(
            role="system", kind="notice", content=text, run_id=run.run_id,
            step_id=target.step.id if target else None,
            run_event=RunEvent(action=action, step_id=step_id or (
                target.step.id if target and action in ("skip", "redo") else None)))
        written = self.engine.writer.write(conv_id, [entry], "the run's control")
        failure = written.failure
        if failure is not None:
            raise StoreWriteError(f"The run was not changed: {failure.cause}.", None,
                                  failure.cause)
        return written.entries[0]

    async def _following(self, conv_id: str, events: AsyncIterator[EngineEvent]
                         ) -> AsyncIterator[EngineEvent]:
        """A turn's events, with a report of the run after each entry that moved it (a step
        completed): whoever shows the run follows it within the turn."""
        async for event in events:
            yield event
            if isinstance(event, EntryAppended) and event.message.run_id is not None and \
                    event.message.tool_name == COMPLETE_STEP and event.message.status == "ok":
                yield self._updated(conv_id)

    def _updated(self, conv_id: str, run: RunState | None = None,
                 final: bool = False) -> RunUpdated:
        """A snapshot for whoever shows the run (another thread may read it), the run file
        brought up to date on the way."""
        run = run if run is not None else self.state(conv_id)
        if run is None:
            return RunUpdated(conv_id, None, "This conversation has no run.")
        snapshot = copy.deepcopy(run)
        if final:
            self.engine.writer.sync_run(conv_id, snapshot)
        return RunUpdated(conv_id, snapshot, STOPPED.get(run.status) if final else None)

"""Run mode in the window: the run panel, the project's workflows, and runs started, resumed
and steered from it.

A run's state is always read from the log (core.workflows.state): on opening a conversation, after
every entry a run appends, and from the driver's own reports. Starting, resuming, skipping and
redoing go through the turn runner like any turn (the engine's thread, Stop, approvals);
pause and abort are control entries appended at once, which the running turn honours after its
current round (abort also stops it). Workflow files are read and written here, never in ui.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QTimer

from app.window.notices import Notices
from app.window.turns import TurnRunner
from core.engine import Engine, RunUpdated
from core.model import RunAction
from core.runs.driver import RunControlError, RunDriver
from core.store.conversations import DEFAULT_TITLE
from core.store.project import Project
from core.tools.todo import todo_state
from core.workflows.state import RunState
from core.workflows.workflow import Step, Workflow, WorkflowError, Workflows
from ui.main_window import MainWindow
from ui.run_panel import RunView, StepView
from ui.throttle import Throttle

if TYPE_CHECKING:
    from core.model import Mode

REFRESH_MS = 120  # entries of a run arriving in a burst: one reading of its state


class RunHost(Protocol):
    project: Project | None
    engine: Engine | None
    current_id: str | None

    def busy(self) -> bool: ...
    def refresh_list(self) -> None: ...
    def mode(self) -> Mode: ...
    def set_mode(self, mode: Mode) -> None: ...


class RunFlow(QObject):
    """Attributes:
        driver: the open project's run driver (None before a project is open).
    """

    def __init__(self, window: MainWindow, notices: Notices, host: RunHost, turns: TurnRunner,
                 show_entry: Callable[[str], None]) -> None:
        super().__init__(window)
        self._show_entry = show_entry
        self.window = window
        self.notices = notices
        self.host = host
        self.turns = turns
        self.panel = window.run_panel
        self.driver: RunDriver | None = None
        self.workflows: Workflows | None = None
        self._found: dict[str, tuple[Path, Workflow]] = {}
        self._message = ""  # why the run stopped, from the driver's last report
        self._refresh = Throttle(self.show_current, REFRESH_MS, self, mode="debounce")
        self.panel.start_requested.connect(self._on_panel_start_requested)
        self.panel.control_requested.connect(self._on_panel_control_requested)
        self.panel.workflow_action.connect(self._on_panel_workflow_action)
        self.panel.step_selected.connect(self._on_panel_step_selected)
        self.panel.workflow_chosen.connect(lambda _name: self.show_current())
        window.mode_switcher.mode_changed.connect(self._on_mode_switcher_mode_changed)
        turns.run_updated.connect(self._on_turns_run_updated)
        turns.finished.connect(lambda _status: self._after_turn())

    # --- project and conversation ----------------------------------------------------------------

    def project_opened(self, project: Project, engine: Engine) -> list[str]:
        """Read the project's workflows; returns one sentence per unusable file."""
        self.driver = RunDriver(engine)
        self.workflows = Workflows(project.state)
        return self.reload_workflows()

    def reload_workflows(self, select: str | None = None) -> list[str]:
        if self.workflows is None:
            return []
        found, problems = self.workflows.list()
        self._found = {wf.name: (path, wf) for path, wf in found}
        self.panel.set_workflows([wf.name for _, wf in found], select)
        self.show_current()  # a workflow just made or changed: its steps at once
        return problems

    def conversation_shown(self, conv_id: str) -> None:
        self._message = ""
        self.panel.goal.clear()
        run = self.state()
        if run is not None and self.driver is not None:
            problem = self.driver.engine.writer.sync_run(conv_id, run)
            if problem:  # repaired from the log: news, not a problem of the user's
                self.notices.info(problem)
        if run is not None and run.open and self.host.mode() == "run":
            self.panel.show()  # reopened as it was left: the run where it stands
        self.show_current()

    def state(self) -> RunState | None:
        """The current conversation's latest run, as its log says."""
        conv = self.host.current_id
        if self.driver is None or conv is None:
            return None
        return self.driver.state(conv)  # the project context's fold, shared with the engine

    def open_driver(self) -> RunDriver | None:
        """The driver when the current conversation has a run that can go on (a message in
        run mode then joins its active step)."""
        run = self.state()
        return self.driver if run is not None and run.open else None

    def show_current(self) -> None:
        run = self.state()
        # a turn in run mode: the panel's Pause and Abort act on it
        busy = self.host.busy() and self.host.mode() == "run"
        self.panel.set_busy(busy)
        if run is not None:
            self.panel.show_run(view_of(run, self._message, busy))
            if run.goal and not self.panel.goal.text():
                self.panel.goal.setText(run.goal)
            return
        chosen = self._found.get(self.panel.workflows.currentText())
        self.panel.show_run(RunView(chosen[1].name, "ready", [
            StepView(s.id, s.title, "pending", brief=s.brief) for s in chosen[1].steps])
            if chosen is not None else None)

    # --- the panel -------------------------------------------------------------------------------

    def _on_turns_run_updated(self, event: RunUpdated | None) -> None:
        if event is not None and event.conv_id != self.host.current_id:
            return
        if event is not None:  # why it stopped, or nothing: it moved on since
            self._message = event.stopped or ""
        self._refresh()

    def _after_turn(self) -> None:
        self._refresh.cancel()
        self.show_current()

    def _on_mode_switcher_mode_changed(self, mode: str) -> None:
        """Leaving Run while a run's turn is under way pauses the run after this round: the
        other mode's prefix is for your next messages, not for the run's next step."""
        run = self.state()
        if mode == "run" or not self.host.busy() or run is None or not run.open or \
                run.status == "paused" or self.driver is None or self.host.current_id is None:
            return
        self._record(self.host.current_id, "pause", "")
        self.notices.info(f"The run of {run.workflow.name!r} pauses after this round: you "
                          f"switched to {mode.capitalize()}. Back in Run, Resume carries "
                          "it on.")
        self.show_current()

    def _on_panel_start_requested(self, name: str, goal: str) -> None:
        driver = self.driver
        found = self._found.get(name)
        if driver is None or found is None or self.host.busy():
            return
        try:  # read again: the file may have changed since the list was made
            workflow = self.workflows.find(str(found[0])) if self.workflows else found[1]
        except WorkflowError as e:
            self.notices.warning(str(e))
            return
        run = self.state()
        if run is not None and run.open and run.status != "post_run":
            self.notices.warning(f"The run of {run.workflow.name!r} is still {run.status}; "
                                 "abort it before starting another.")
            return
        self.host.set_mode("run")
        self._message = ""
        self._name_conversation(workflow)
        self.turns.start_run(lambda conv, settings, options: driver.start(
            conv, workflow, settings, options, goal))
        self.show_current()
        self.window.composer.editor.setFocus()  # typing goes to the run, never elsewhere

    def _on_panel_control_requested(self, action: RunAction, step_id: str) -> None:
        conv, run = self.host.current_id, self.state()
        project = self.host.project
        if self.driver is None or conv is None or project is None:
            return
        if project.read_only:
            self.notices.warning("Read-only: a run cannot be changed from this window.")
            return
        question = _confirmation(run, action, step_id)
        if question is None:
            self._control(conv, action, step_id)
            return
        text, detail, yes = question
        self.window.ask(text, detail, (yes, "Cancel"),
                        lambda choice: self._control(conv, action, step_id)
                        if choice == yes else None)

    def _control(self, conv: str, action: RunAction, step_id: str) -> None:
        """Record the control (unless only carrying on) and carry the run on where it goes."""
        if conv != self.host.current_id or self.driver is None:
            return
        busy = self.host.busy()
        run = self.state()
        if not (action == "resume" and run is not None and run.status != "paused"):
            if not self._record(conv, action, step_id):
                return
        self._message = ""
        if action == "abort" and busy:
            self.turns.stop()
        elif action in ("resume", "skip", "redo") and not busy:
            self.host.set_mode("run")
            self.turns.start_run(self.driver.drive)
        self.show_current()
        # The button pressed may be disabled now, and Qt would hand its focus to the next
        # widget (the conversation search): typing goes to the message box instead, once a
        # question box that asked first has closed.
        QTimer.singleShot(0, self.window.composer.editor.setFocus)

    def _record(self, conv: str, action: RunAction, step_id: str) -> bool:
        """The control entry, in the log and in the transcript (before an answer streaming)."""
        assert self.driver is not None
        try:
            entry = self.driver.control(conv, action, step_id or None)
        except RunControlError as e:
            self.notices.warning(str(e))
            return False
        self.window.transcript_model.append_message(entry)
        return True

    def _on_panel_step_selected(self, step_id: str) -> None:
        """Select the step's first entry in the transcript."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None:
            return
        run = self.state()
        first = next((m.id for m in project.conversations.load(conv).messages
                      if m.step_id == step_id and run is not None and m.run_id == run.run_id),
                     None)
        if first is not None:
            self._show_entry(first)

    def _on_panel_workflow_action(self, action: str, name: str) -> None:
        from ui.workflow_dialog import WorkflowDialog

        workflows = self.workflows
        if workflows is None:
            return
        found = self._found.get(name)
        if action == "delete" and found is not None:
            path = found[0]

            def answered(choice: str) -> None:
                if choice == "Delete":
                    workflows.delete(path)
                    self.reload_workflows()

            self.window.ask(f"Delete the workflow {name!r}?",
                            f"Its file {path.name} is removed. Runs already started keep their "
                            "copy in their conversation.", ("Delete", "Cancel"), answered)
            return
        if action == "duplicate" and found is not None:
            copy = found[1].model_copy(update={"name": workflows.unused_name(
                f"{found[1].name} copy")})
            self._save(copy)
            return
        start: Workflow | None = found[1] if action == "edit" and found else None
        if action == "save_plan":
            start = self._plan_as_workflow()
            if start is None:
                return
        title = {"new": "New workflow", "edit": f"Edit {name}",
                 "save_plan": "Save this plan as a workflow"}.get(action, "Workflow")
        dialog = WorkflowDialog(start, self.window, title)
        if dialog.exec() and dialog.workflow() is not None:
            result = dialog.workflow()
            assert result is not None
            self._save(result, found[0] if action == "edit" and found else None)

    def _name_conversation(self, workflow: Workflow) -> None:
        """A conversation still untitled takes the run's name (the list tells runs apart)."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None:
            return
        meta = project.conversations.meta(conv)
        if meta.title in ("", DEFAULT_TITLE) and not project.conversations.load(conv).messages:
            project.conversations.rename(conv, f"Run: {workflow.name}")
            self.host.refresh_list()

    def _save(self, workflow: Workflow, replace: Path | None = None) -> None:
        assert self.workflows is not None
        if self.host.project is None or self.host.project.read_only:
            self.notices.warning("Read-only: workflows cannot be saved from this window.")
            return
        taken = self._found.get(workflow.name)
        if taken is not None and taken[0] != replace:
            workflow = workflow.model_copy(update={"name": self.workflows.unused_name(
                workflow.name)})
        try:
            self.workflows.save(workflow, replace)
        except OSError as e:
            self.notices.error(f"The workflow could not be saved ({e.strerror or e}).")
            return
        self.reload_workflows(workflow.name)

    def _plan_as_workflow(self) -> Workflow | None:
        """The agent's todo list of this conversation as a workflow to edit and save."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None or self.workflows is None:
            return None
        items = todo_state(project.conversations.load(conv).messages)
        if not items:
            self.notices.warning("This conversation has no plan yet: the agent's todo list "
                                 "is empty. Ask the agent to plan the work first.")
            return None
        title = project.conversations.meta(conv).title or "Plan"
        steps = tuple(Step(id=f"step-{n}", title=" ".join(i.text.split())[:200] or f"Step {n}",
                           brief=i.text, done_when="")
                      for n, i in enumerate(items, 1))
        return Workflow(name=self.workflows.unused_name(f"Plan: {title}"[:120]),
                        description=f"From the agent's plan in {title!r}", steps=steps)


def view_of(run: RunState, message: str = "", busy: bool = False) -> RunView:
    """What the panel shows of a run (plain values, a copy). `busy`: a turn of it is under
    way now."""
    status: str = run.status
    if busy and status == "paused":
        status = "pausing"
        message = "Pausing: the run stops when the current answer or tool round is done."
    elif busy:  # a turn of it is under way (the user's answer, Resume): why it stopped is past
        message = ""
    elif not message:
        message = IDLE_NOTES.get(run.status, "")
    if run.problems:  # what in the log contradicts the run is said, never obeyed
        message = " ".join(filter(None, (message, *run.problems[-3:])))
    return RunView(
        workflow=run.workflow.name, status=status, goal=run.goal, message=message,
        steps=[StepView(s.step.id, s.step.title, s.status, s.result, s.elapsed_s(), s.tokens,
                        s.error, s.step.brief) for s in run.steps])


IDLE_NOTES = {  # what a run waits for when no turn of it is under way
    "waiting": "The model stopped without completing the step: answer it, or Resume.",
    "failed": "The step's last request failed: Resume carries on at the step once the cause "
              "is fixed (Retry on the error runs the request again).",
    "limit": "The step reached its limit of tool rounds: Resume (or Continue) lets it go on.",
    "running": "Not running now (the app closed while it worked): Resume carries on at the "
               "active step.",
    "post_run": "Every step is done; the wrap-up is not written yet: Resume writes it.",
}


def _confirmation(run: RunState | None, action: str, step_id: str
                  ) -> tuple[str, str, str] | None:
    """(question, detail, the button that goes ahead) for a control that loses work."""
    if run is None:
        return None
    if action == "abort":
        return (f"Abort the run of {run.workflow.name!r}?",
                "It ends at the step it is on; everything it did stays in the conversation. "
                "Redo a step to start again from there.", "Abort run")
    target = run.step(step_id) if step_id else None
    if action == "redo" and target is not None:
        at = run.steps.index(target)
        done = [s for s in run.steps[at:] if s.status in ("done", "skipped")]
        if done:
            return (f"Redo step {at + 1} ({target.step.title})?",
                    f"It and the steps after it start over; the results of {len(done)} "
                    "finished step(s) no longer count (their entries stay in the "
                    "conversation).", "Redo")
    return None

"""Run mode on the command line: `workbench run` and `workbench workflows`.

    workbench run PROJECT (--conversation ID | --new) --workflow NAME|FILE [--goal TEXT] ...
    workbench run PROJECT --conversation ID --resume
    workbench workflows PROJECT

A run goes until the workflow is complete (exit 0), a request fails or a step reaches its
limit (an error entry: exit 2, and `--resume` carries on at the step), or it pauses: the model
stopped without completing its step, or the run was paused or aborted (exit 3).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from app.cli.commands import (
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    CliError,
    open_project,
)
from app.cli.run_progress import run_progress
from app.cli.term import for_stream
from app.cli.turn import closing, prepare_turn, print_turn
from core.workflows.workflow import Workflow, WorkflowError, Workflows

if TYPE_CHECKING:  # the engine (litellm behind it) is imported when a run starts
    from core.workflows.state import RunState

EXIT_PAUSED = 3
EXIT_BY_STATUS = {"finished": EXIT_OK, "failed": EXIT_TURN_ERROR, "limit": EXIT_TURN_ERROR,
                  "waiting": EXIT_PAUSED, "paused": EXIT_PAUSED, "aborted": EXIT_PAUSED,
                  "running": EXIT_PAUSED, "post_run": EXIT_PAUSED}


def cmd_workflows(args: argparse.Namespace) -> int:
    project = open_project(args.project, create=False, read_only=True)
    try:
        found, problems = Workflows(project.state).list()
    finally:
        project.close()
    for problem in problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    if not found:
        print("no workflows yet (.workbench/workflows/<name>.json)", file=sys.stderr)
    for path, wf in found:
        steps = " → ".join(s.title for s in wf.steps)
        print(for_stream(f"{wf.name}  ({path.name}, {len(wf.steps)} steps)", sys.stdout))
        if wf.description:
            print(for_stream(f"  {' '.join(wf.description.split())[:200]}", sys.stdout))
        print(for_stream(f"  {steps}", sys.stdout))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    if args.resume and (args.new or args.workflow):
        raise CliError("--resume carries on the conversation's run: give --conversation ID "
                       "and no --workflow", EXIT_USAGE)
    if not args.resume and not args.workflow:
        raise CliError("say which workflow to run: --workflow NAME or FILE.json (or --resume "
                       "to carry on the conversation's run)", EXIT_USAGE)
    workflow: Workflow | None = None
    if args.workflow:  # checked before anything is created or sent
        workflow = _find(Workflows(args.project / ".workbench"), args.workflow)
    from core.runs.driver import RunControlError, RunDriver

    title = f"Run: {workflow.name}" if workflow is not None else "Run"
    turn = prepare_turn(args, create=args.new, title=title, mode="run")
    try:
        driver = RunDriver(turn.engine)
        if workflow is not None:
            _copy_into(Workflows(turn.project.state), workflow, args.workflow)
            events = driver.start(turn.conv_id, workflow, turn.settings, turn.options,
                                  args.goal or "")
        else:
            run = driver.state(turn.conv_id)
            if run is None:
                raise CliError("this conversation has no run to resume; start one with "
                               "--workflow")
            if run.status in ("finished", "aborted"):
                raise CliError(f"the run of {run.workflow.name!r} is {run.status}; there is "
                               "nothing to resume")
            if run.status == "paused":
                driver.control(turn.conv_id, "resume")
            events = driver.drive(turn.conv_id, turn.settings, turn.options)
        final: list[RunState] = []
        code = print_turn(closing(events, turn.engine),
                          run_progress(final, args.project, turn.conv_id))
    except (RunControlError, WorkflowError) as e:
        raise CliError(str(e)) from None
    finally:
        turn.project.close()
    if code in (EXIT_FAIL, EXIT_INTERRUPTED) or not final:
        return code if code != EXIT_OK else EXIT_FAIL
    return EXIT_BY_STATUS[final[-1].status]


def _find(workflows: Workflows, name_or_path: str) -> Workflow:
    try:
        return workflows.find(name_or_path)
    except WorkflowError as e:
        raise CliError(str(e)) from None


def _copy_into(workflows: Workflows, workflow: Workflow, given: str) -> None:
    """A workflow given as a path is kept in the project (under a free name when another
    workflow already has its file), so the window lists it and the run can be redone."""
    if not given.endswith(".json") or any(wf == workflow for _, wf in workflows.list()[0]):
        return
    name = workflows.unused_name(workflow.name)
    path = workflows.save(workflow.model_copy(update={"name": name}))
    print(for_stream(f"workbench: workflow copied into the project as {path.name}", sys.stderr),
          file=sys.stderr)

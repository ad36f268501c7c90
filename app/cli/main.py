"""`workbench`: the command line, a thin front over the same core the window uses.

    workbench [PROJECT_DIR]                          open the window
    workbench send PROJECT (--conversation ID | --new [--title T]) [--model M] [--mode M]
                   [--approve never|ask|always] [--agent NAME] [--allow-network] TEXT
    workbench continue PROJECT --conversation ID [--model M]    (resume an unfinished answer)
    workbench retry PROJECT --conversation ID [--model M]       (run the failed request again)
    workbench import PROJECT FILE
    workbench export PROJECT --conversation ID [--format openai|jsonl|markdown]
    workbench list PROJECT
    workbench agents PROJECT                          (the project's agents and the sandbox)
    workbench mcp PROJECT                             (MCP servers, their tools and costs)
    workbench context PROJECT --conversation ID [--mode M] [--model M] [--budget N] [--json]
    workbench compact PROJECT --conversation ID [--focus TEXT] [--model M] [--api-base URL]
                      [--summary-model M]        (summarize the older history now)
    workbench pin|unpin|exclude|include PROJECT --conversation ID ENTRY_ID
                                                 (always send / never send one entry)
    workbench fork PROJECT --conversation ID ENTRY_ID [--before] [--title T]
                                                 (a branch: the history up to that entry)
    workbench run PROJECT (--conversation ID | --new) --workflow NAME|FILE [--goal TEXT]
                  [--model M] [--api-base URL] [--approve never|ask|always]
    workbench run PROJECT --conversation ID --resume   (carry on at the active step)
    workbench workflows PROJECT                       (the project's workflows)
    workbench trust PROJECT [--yes | --revoke]        (what a project ships that acts for you)
    workbench usage PROJECT [-c ID] [--since DATE] [--json]   (what the conversations cost)
    workbench checkpoints PROJECT -c ID [--json]      (the agent turns that changed files)
    workbench restore PROJECT -c ID ENTRY_ID [--force]   (the files as just before that entry)
    workbench diff PROJECT -c ID ENTRY_ID             (a turn's file changes, unified diff)

Exit codes: 0 success; 1 bad input or a project problem (the reason goes to stderr); 2 the turn
ended in an error entry (send, run: resumable), or the summarizer failed (compact; the log is
unchanged); 3 the run paused (the model needs the user, or it was paused or aborted); 64 a
usage mistake; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from app import start_up
from app.cli.checkpoints import cmd_checkpoints, cmd_diff, cmd_restore
from app.cli.commands import (
    COMMANDS,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    CliError,
    cmd_agents,
    cmd_context,
    cmd_export,
    cmd_import,
    cmd_list,
    cmd_mcp,
    cmd_trust,
)
from app.cli.context import cmd_annotate, cmd_compact, cmd_forget_window, cmd_fork
from app.cli.parser import build_parser
from app.cli.run import cmd_run, cmd_workflows
from app.cli.turn import cmd_continue, cmd_retry, cmd_send
from core.store.errors import StoreError

__all__ = ["EXIT_FAIL", "EXIT_OK", "EXIT_TURN_ERROR", "EXIT_USAGE", "build_parser", "main"]


def run() -> NoReturn:
    """The `workbench` command: `main`, then out at once. A process that imported litellm spent
    a noticeable while tearing its hundreds of modules down after the work was done, and the
    window's background threads (the meter's count) would be waited for; everything of
    ours is written and closed by then, so once the request copies are written and the output
    flushed, the process ends."""
    start_up.without_collector()  # until the model's transport is warm (app/start_up.py)
    code = main()
    if "core.request_copies" in sys.modules:
        from core.request_copies import finish_writes

        finish_writes()  # a Stop leaves its request's copy to be written in the background
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said anyway
        pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (args_list[0] not in COMMANDS and not args_list[0].startswith("-")):
        return _open_window(args_list)
    return _run_command(build_parser().parse_args(args_list))


def _open_window(args_list: list[str]) -> int:
    """`workbench [PROJECT_DIR]`: the window, or the usage mistake that is not one."""
    problem = _window_usage_problem(args_list)
    if problem:
        print(f"workbench: {problem}", file=sys.stderr)
        print(f"commands: {', '.join(COMMANDS)}; `workbench --help` says more",
              file=sys.stderr)
        return EXIT_USAGE
    from app.window.start import run_gui  # the window; imported only when wanted

    return run_gui(args_list[0] if args_list else None)


def _cmd_usage(args: argparse.Namespace) -> int:
    from app.cli.usage import cmd_usage  # imported only for this command

    return cmd_usage(args)


_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "send": cmd_send, "continue": cmd_continue, "retry": cmd_retry,
    "import": cmd_import, "export": cmd_export, "list": cmd_list,
    "context": cmd_context, "agents": cmd_agents, "mcp": cmd_mcp, "compact": cmd_compact,
    "run": cmd_run, "workflows": cmd_workflows,
    "pin": cmd_annotate, "unpin": cmd_annotate, "exclude": cmd_annotate, "include": cmd_annotate,
    "fork": cmd_fork, "trust": cmd_trust, "usage": _cmd_usage,
    "checkpoints": cmd_checkpoints, "restore": cmd_restore, "diff": cmd_diff,
    "forget-window": cmd_forget_window,
}


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; a failure it reports in one sentence becomes its exit code."""
    try:
        return _HANDLERS[args.command](args)
    except CliError as e:
        print(f"workbench: {e}", file=sys.stderr)
        return e.code
    except StoreError as e:  # a project problem the store put in one sentence
        print(f"workbench: {e}", file=sys.stderr)
        return EXIT_FAIL
    except OSError as e:
        if isinstance(e, BrokenPipeError):  # `workbench export ... | head`
            return EXIT_OK
        where = f": {e.filename}" if e.filename else ""
        print(f"workbench: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("\nworkbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _window_usage_problem(args: list[str]) -> str | None:
    """`workbench [PROJECT_DIR]` opens the window; anything else that is not a command is a
    mistake to report, not a new project folder named after a typo."""
    if not args:
        return None
    if len(args) > 1:
        return (f"unexpected arguments after the project folder: {' '.join(args[1:])!r} "
                f"({args[0]!r} is not a command)")
    target = args[0]
    path = Path(target).expanduser()
    if path.is_dir():
        return None
    if path.exists():
        return f"{target!r} is a file, not a project folder or a command"
    looks_like_path = os.sep in target or target.startswith(("~", ".")) or \
        (os.altsep is not None and os.altsep in target)
    if looks_like_path:
        return None  # an explicit path: the window creates the project there
    return (f"unknown command {target!r}. To open a new project in a folder of that name, "
            f"give it as a path: workbench ./{target}")


if __name__ == "__main__":
    raise SystemExit(main())

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
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from app.cli.checkpoints import add_parsers as checkpoint_parsers
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
from app.cli.run import cmd_run, cmd_workflows
from app.cli.turn import cmd_continue, cmd_retry, cmd_send
from core.store.errors import StoreError

__all__ = ["EXIT_FAIL", "EXIT_OK", "EXIT_TURN_ERROR", "EXIT_USAGE", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="workbench",
        description="Context Workbench command line. `workbench [PROJECT_DIR]` (no command) "
        "opens the window on that project, or on the last one used.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def window_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--context-window", type=int, metavar="N",
                       help="the model's context window in tokens, where neither litellm nor "
                            "the server says it (WORKBENCH_CONTEXT_WINDOW)")

    def model_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="litellm model string, e.g. gpt-4o-mini, ollama/llama3")
        p.add_argument("--api-base", help="base URL of an OpenAI-compatible server")
        p.add_argument("--max-tokens", type=int, help="maximum output tokens for the answer")
        window_flag(p)
        p.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="give up on a request that has not answered in this many seconds "
                            "(default 600; WORKBENCH_REQUEST_TIMEOUT)")
        p.add_argument("--mode", choices=("chat", "agent", "run"), default=None,
                       help="system prompt to use (default: the conversation's mode)")

    def agent_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--approve", choices=("never", "ask", "always"), default=None,
                       help="writes and commands: ask first (on a terminal), always run, or "
                            "never run (default: ask on a terminal, else never)")
        p.add_argument("--agent", metavar="NAME",
                       help="the agent (from .workbench/agents/) for this conversation")
        p.add_argument("--allow-network", action="store_true",
                       help="let commands in this conversation use the network")
        p.add_argument("--step-limit", type=int, metavar="N",
                       help="rounds of tool calls before the turn pauses (default 50)")

    def trust_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--trust", action="store_true",
                       help="trust what the project ships that acts for you (its MCP servers, "
                            "its provider settings), as `workbench trust` lists it")

    def conversation_flags(p: argparse.ArgumentParser) -> None:
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--conversation", "-c", metavar="ID", help="id (or unique prefix)")
        which.add_argument("--new", action="store_true", help="start a new conversation")
        p.add_argument("--title", help="title of the new conversation")

    p = sub.add_parser("send", help="send a message and print the answer as it streams")
    p.add_argument("project", type=Path)
    conversation_flags(p)
    model_flags(p)
    agent_flags(p)
    trust_flag(p)
    p.add_argument("text", help="the message; '-' reads it from standard input")
    p.add_argument("--title-model", action="store_true",
                   help="a new conversation's title written by the model (waits for it); "
                        "default: its opening words, at once")
    p.add_argument("--attach", action="append", default=[], metavar="PATH",
                   help="send this file with the message (text files, PNG/JPEG/GIF/WebP "
                        "images; repeat for more)")

    for name, what in (("continue", "resume the unfinished answer the conversation ends with"),
                       ("retry", "run the failed request again from scratch")):
        p = sub.add_parser(name, help=what)
        p.add_argument("project", type=Path)
        p.add_argument("--conversation", "-c", metavar="ID", required=True)
        model_flags(p)
        agent_flags(p)
        trust_flag(p)

    p = sub.add_parser("import", help="import an OpenAI-format conversation (JSON)")
    p.add_argument("project", type=Path)
    p.add_argument("file", type=Path)
    p.add_argument("--title", help="title (default: from the file)")

    p = sub.add_parser("export", help="write a conversation to standard output")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("--format", choices=("openai", "jsonl", "markdown"), default="openai")

    p = sub.add_parser("list", help="list the conversations of a project")
    p.add_argument("project", type=Path)

    p = sub.add_parser("mcp", help="start the project's MCP servers and list their tools")
    p.add_argument("project", type=Path)
    trust_flag(p)
    p = sub.add_parser("agents", help="list the project's agents (.workbench/agents/)")
    p.add_argument("project", type=Path)

    p = sub.add_parser("context", help="show the request the next turn would send, and why")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    model_flags(p)
    p.add_argument("--budget", type=int, metavar="N",
                   help="usable input budget in tokens for this build (prefix, tools, messages)")
    p.add_argument("--json", action="store_true",
                   help='print {"messages": [...], "tools": [...], "report": {...}}')

    p = sub.add_parser("compact", help="summarize the conversation's older history now (the "
                                       "next requests use the summary in its place)")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("--focus", metavar="TEXT", help="what the summary should keep above all")
    p.add_argument("--model", help="the conversation's model (its window and tokens)")
    p.add_argument("--api-base", help="base URL of an OpenAI-compatible server")
    p.add_argument("--summary-model", metavar="M",
                   help="the model that writes the summary (default: settings' summary_model, "
                        "else --model)")
    p.add_argument("--max-tokens", type=int,
                   help="maximum output tokens for the summary (512 at least)")
    window_flag(p)
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="request timeout")
    trust_flag(p)

    for name, what in (("pin", "always send an entry (compaction keeps it verbatim)"),
                       ("unpin", "let compaction treat a pinned entry like the others"),
                       ("exclude", "never send an entry (excluding a summary undoes it)"),
                       ("include", "send an excluded entry again")):
        p = sub.add_parser(name, help=what)
        p.add_argument("project", type=Path)
        p.add_argument("--conversation", "-c", metavar="ID", required=True)
        p.add_argument("entry", metavar="ENTRY_ID",
                       help="the entry's id or a unique prefix (`workbench context` and "
                            "`export --format jsonl` show ids)")

    p = sub.add_parser("fork", help="start a branch: a new conversation with the history up to "
                                    "an entry (the original is not changed)")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("entry", metavar="ENTRY_ID", help="the last entry the branch keeps (an id or "
                                                     "a unique prefix)")
    p.add_argument("--before", action="store_true",
                   help="keep the history up to just before the entry (to send another "
                        "message in its place)")
    p.add_argument("--title", help="the branch's title (default: the original's, \"(branch)\")")

    p = sub.add_parser("run", help="run a workflow step by step in a conversation (run mode)")
    p.add_argument("project", type=Path)
    conversation_flags(p)
    p.add_argument("--workflow", "-w", metavar="NAME|FILE",
                   help="a workflow of the project (by name) or a .json file (copied into the "
                        "project)")
    p.add_argument("--goal", metavar="TEXT", help="what this run is for (the directive says it)")
    p.add_argument("--resume", action="store_true",
                   help="carry on the conversation's run at its active step")
    model_flags(p)
    agent_flags(p)
    trust_flag(p)

    p = sub.add_parser("workflows", help="list the project's workflows (.workbench/workflows/)")
    p.add_argument("project", type=Path)

    p = sub.add_parser("trust", help="list what the project ships that acts on your behalf "
                                     "(MCP commands, where requests go) and trust it")
    p.add_argument("project", type=Path)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--yes", action="store_true", help="trust without asking")
    which.add_argument("--revoke", action="store_true", help="take the trust back")

    p = sub.add_parser("usage", help="what the project's conversations cost: requests, tokens "
                                     "and USD, per conversation and in total")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", help="only this conversation")
    p.add_argument("--since", metavar="DATE", help="only requests made since (2026-11-26)")
    p.add_argument("--json", action="store_true", help="as JSON (costs as numbers, USD)")
    p = sub.add_parser("forget-window", help="forget the context window learned for a model "
                                             "at its server (the next request asks again)")
    p.add_argument("project", type=Path)
    p.add_argument("--model", help="the model (default: the project's)")
    p.add_argument("--api-base", help="its server's base URL (default: the project's)")
    trust_flag(p)
    checkpoint_parsers(sub)
    return parser


def run() -> NoReturn:
    """The `workbench` command: `main`, then out at once. A process that imported litellm spent
    a second or more tearing its hundreds of modules down after the work was done (1.3 s here),
    and the window's background threads (the meter's count) would be waited for; everything of
    ours is written and closed by then, so once the request copies are written and the output
    flushed, the process ends."""
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
        problem = _window_usage_problem(args_list)
        if problem:
            print(f"workbench: {problem}", file=sys.stderr)
            print(f"commands: {', '.join(COMMANDS)}; `workbench --help` says more",
                  file=sys.stderr)
            return EXIT_USAGE
        from app.window.start import run_gui  # the window; imported only when wanted

        return run_gui(args_list[0] if args_list else None)
    args = build_parser().parse_args(args_list)
    try:
        if args.command == "send":
            return cmd_send(args)
        if args.command == "continue":
            return cmd_continue(args)
        if args.command == "retry":
            return cmd_retry(args)
        if args.command == "import":
            return cmd_import(args)
        if args.command == "export":
            return cmd_export(args)
        if args.command == "context":
            return cmd_context(args)
        if args.command == "agents":
            return cmd_agents(args)
        if args.command == "mcp":
            return cmd_mcp(args)
        if args.command == "compact":
            return cmd_compact(args)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "workflows":
            return cmd_workflows(args)
        if args.command in ("pin", "unpin", "exclude", "include"):
            return cmd_annotate(args)
        if args.command == "fork":
            return cmd_fork(args)
        if args.command == "trust":
            return cmd_trust(args)
        if args.command == "usage":
            from app.cli.usage import cmd_usage

            return cmd_usage(args)
        if args.command in ("checkpoints", "restore", "diff", "forget-window"):
            return {"checkpoints": cmd_checkpoints, "restore": cmd_restore,
                    "diff": cmd_diff, "forget-window": cmd_forget_window}[args.command](args)
        return cmd_list(args)
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

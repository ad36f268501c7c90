"""The `workbench` command line's parser: one sub-command per verb (app/cli/main.py lists them
and dispatches), the flags several verbs share written once each."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from app.cli.checkpoints import add_parsers as checkpoint_parsers
from app.cli.commands import EXIT_USAGE


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
    _turn_parsers(sub)
    _file_parsers(sub)
    _context_parsers(sub)
    _entry_parsers(sub)
    _run_parsers(sub)
    _project_parsers(sub)
    checkpoint_parsers(sub)
    return parser


# The flags several commands share.

def _window_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-window", type=int, metavar="N",
                   help="the model's context window in tokens, where neither litellm nor "
                        "the server says it (WORKBENCH_CONTEXT_WINDOW)")


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="litellm model string, e.g. gpt-4o-mini, ollama/llama3")
    p.add_argument("--api-base", help="base URL of an OpenAI-compatible server")
    p.add_argument("--max-tokens", type=int, help="maximum output tokens for the answer")
    _window_flag(p)
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="give up on a request that has not answered in this many seconds "
                        "(default 600; WORKBENCH_REQUEST_TIMEOUT)")
    p.add_argument("--mode", choices=("chat", "agent", "run"), default=None,
                   help="system prompt to use (default: the conversation's mode)")


def _agent_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--approve", choices=("never", "ask", "always"), default=None,
                   help="writes and commands: ask first (on a terminal), always run, or "
                        "never run (default: ask on a terminal, else never)")
    p.add_argument("--agent", metavar="NAME",
                   help="the agent (from .workbench/agents/) for this conversation")
    p.add_argument("--allow-network", action="store_true",
                   help="let commands in this conversation use the network")
    p.add_argument("--step-limit", type=int, metavar="N",
                   help="rounds of tool calls before the turn pauses (default 50)")


def _trust_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust", action="store_true",
                   help="trust what the project ships that acts for you (its MCP servers, "
                        "its provider settings), as `workbench trust` lists it")


def _conversation_flags(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--conversation", "-c", metavar="ID", help="id (or unique prefix)")
    which.add_argument("--new", action="store_true", help="start a new conversation")
    p.add_argument("--title", help="title of the new conversation")


def _project_and_conversation(p: argparse.ArgumentParser) -> None:
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)


# The commands, in the order `workbench --help` lists them.

def _turn_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """send, continue, retry: a turn with the model."""
    p = sub.add_parser("send", help="send a message and print the answer as it streams")
    p.add_argument("project", type=Path)
    _conversation_flags(p)
    _model_flags(p)
    _agent_flags(p)
    _trust_flag(p)
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
        _project_and_conversation(p)
        _model_flags(p)
        _agent_flags(p)
        _trust_flag(p)


def _file_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """import, export, list, mcp, agents: conversations in and out, what the project has."""
    p = sub.add_parser("import", help="import an OpenAI-format conversation (JSON)")
    p.add_argument("project", type=Path)
    p.add_argument("file", type=Path)
    p.add_argument("--title", help="title (default: from the file)")

    p = sub.add_parser("export", help="write a conversation to standard output")
    _project_and_conversation(p)
    p.add_argument("--format", choices=("openai", "jsonl", "markdown"), default="openai")

    p = sub.add_parser("list", help="list the conversations of a project")
    p.add_argument("project", type=Path)

    p = sub.add_parser("mcp", help="start the project's MCP servers and list their tools")
    p.add_argument("project", type=Path)
    _trust_flag(p)
    p = sub.add_parser("agents", help="list the project's agents (.workbench/agents/)")
    p.add_argument("project", type=Path)


def _context_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """context, compact: what the next request sends, and its older history summarized."""
    p = sub.add_parser("context", help="show the request the next turn would send, and why")
    _project_and_conversation(p)
    _model_flags(p)
    p.add_argument("--budget", type=int, metavar="N",
                   help="usable input budget in tokens for this build (prefix, tools, messages)")
    p.add_argument("--json", action="store_true",
                   help='print {"messages": [...], "tools": [...], "report": {...}}')

    p = sub.add_parser("compact", help="summarize the conversation's older history now (the "
                                       "next requests use the summary in its place)")
    _project_and_conversation(p)
    p.add_argument("--focus", metavar="TEXT", help="what the summary should keep above all")
    p.add_argument("--model", help="the conversation's model (its window and tokens)")
    p.add_argument("--api-base", help="base URL of an OpenAI-compatible server")
    p.add_argument("--summary-model", metavar="M",
                   help="the model that writes the summary (default: settings' summary_model, "
                        "else --model)")
    p.add_argument("--max-tokens", type=int,
                   help="maximum output tokens for the summary (512 at least)")
    _window_flag(p)
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="request timeout")
    _trust_flag(p)


def _entry_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """pin, unpin, exclude, include, fork: one entry of a conversation."""
    for name, what in (("pin", "always send an entry (compaction keeps it verbatim)"),
                       ("unpin", "let compaction treat a pinned entry like the others"),
                       ("exclude", "never send an entry (excluding a summary undoes it)"),
                       ("include", "send an excluded entry again")):
        p = sub.add_parser(name, help=what)
        _project_and_conversation(p)
        p.add_argument("entry", metavar="ENTRY_ID",
                       help="the entry's id or a unique prefix (`workbench context` and "
                            "`export --format jsonl` show ids)")

    p = sub.add_parser("fork", help="start a branch: a new conversation with the history up to "
                                    "an entry (the original is not changed)")
    _project_and_conversation(p)
    p.add_argument("entry", metavar="ENTRY_ID", help="the last entry the branch keeps (an id or "
                                                     "a unique prefix)")
    p.add_argument("--before", action="store_true",
                   help="keep the history up to just before the entry (to send another "
                        "message in its place)")
    p.add_argument("--title", help="the branch's title (default: the original's, \"(branch)\")")


def _run_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """run, workflows: a workflow step by step."""
    p = sub.add_parser("run", help="run a workflow step by step in a conversation (run mode)")
    p.add_argument("project", type=Path)
    _conversation_flags(p)
    p.add_argument("--workflow", "-w", metavar="NAME|FILE",
                   help="a workflow of the project (by name) or a .json file (copied into the "
                        "project)")
    p.add_argument("--goal", metavar="TEXT", help="what this run is for (the directive says it)")
    p.add_argument("--resume", action="store_true",
                   help="carry on the conversation's run at its active step")
    _model_flags(p)
    _agent_flags(p)
    _trust_flag(p)

    p = sub.add_parser("workflows", help="list the project's workflows (.workbench/workflows/)")
    p.add_argument("project", type=Path)


def _project_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """trust, usage, forget-window: the project's trust, its cost, what it learned of a
    server."""
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
    _trust_flag(p)

"""The `workbench` commands: each opens the project, does one thing through core, and reports
in one sentence on stderr when it cannot (CliError carries the exit code)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.term import for_stream
from core.attachments import AttachmentStore
from core.store.conversations import ConversationStore
from core.store.errors import ConversationNotFound, ProjectPathError, StoreError
from core.store.project import Project

if TYPE_CHECKING:
    from core.context.service import ProjectContext
    from core.engine import Engine  # litellm behind it: imported when needed

EXIT_OK, EXIT_FAIL, EXIT_TURN_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 64, 130
COMMANDS = ("send", "continue", "retry", "import", "export", "list", "context", "agents", "mcp",
            "compact", "pin", "unpin", "exclude", "include", "fork", "run", "workflows", "trust",
            "usage", "checkpoints", "restore", "diff", "forget-window")


class CliError(Exception):
    """A failure to report on stderr in one sentence, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAIL) -> None:
        super().__init__(message)
        self.code = code



# --- commands ----------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from core.interchange import ImportProblem, read_import
    from core.llm.tokens import TokenCounter
    from core.settings import SettingsStore, resolve_llm_settings

    try:
        title, messages = read_import(args.file)
    except ImportProblem as e:
        raise CliError(f"cannot import: {e}") from None
    project = open_project(args.project, create=True)
    try:
        if project.read_only:
            raise CliError(f"{project.read_only_reason} To import into a project the window has "
                           "open, use File → Import… there (or drop the file on its list of "
                           "conversations).")
        settings = resolve_llm_settings(project=project.overrides,
                                        global_settings=SettingsStore().load())
        counter = TokenCounter.for_model(settings.model)
        kept = AttachmentStore.of(project.state)  # inline images: kept once, referred to
        messages = [counter.with_count(kept.extern(m)) for m in messages]
        meta = project.conversations.import_conversation(args.title or title, messages)
    except (StoreError, OSError) as e:
        raise _store_failure(e, "nothing was imported") from None
    finally:
        project.close()
    print(for_stream(f"imported {len(messages)} messages as {meta.title!r}", sys.stderr),
          file=sys.stderr)
    print(meta.id)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from core.interchange import export_jsonl, export_markdown, export_openai

    project = open_project(args.project, create=False, read_only=True)
    try:
        _warn_routing_left_out(project)
        conv_id = resolve_conversation(project.conversations, args.conversation)
        loaded = project.conversations.load(conv_id)
    except (StoreError, OSError) as e:
        raise _store_failure(e, "nothing was exported") from None
    finally:
        project.close()
    for problem in loaded.problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    if args.format == "openai":  # self-contained: attached images inline
        out = export_openai(loaded.messages, loaded.meta.title, loaded.pending_partial,
                            AttachmentStore.of(project.state).inline)
    elif args.format == "jsonl":
        out = export_jsonl(loaded.messages, loaded.pending_partial)
    else:
        out = export_markdown(loaded.messages, loaded.meta.title, loaded.pending_partial)
    sys.stdout.write(for_stream(out, sys.stdout))
    sys.stdout.flush()
    return EXIT_OK


def cmd_context(args: argparse.Namespace) -> int:
    from core.context.builder import BudgetError
    from core.settings import SettingsError, SettingsStore, resolve_llm_settings

    if args.budget is not None and args.budget <= 0:
        raise CliError("--budget must be a positive number of tokens", EXIT_USAGE)
    project = open_project(args.project, create=False, read_only=True)
    try:
        _warn_routing_left_out(project)
        conv_id = resolve_conversation(project.conversations, args.conversation)
        loaded = project.conversations.load(conv_id)
        try:
            settings = resolve_llm_settings(
                cli={"model": args.model, "api_base": args.api_base,
                     "max_output_tokens": args.max_tokens,
                     "context_window": args.context_window},
                project=project.overrides, global_settings=SettingsStore().load())
        except SettingsError as e:
            raise CliError(str(e)) from None
        mode = args.mode or loaded.meta.mode
        from core.agents import find_agent, load_agents

        agent = find_agent(load_agents(project.state, project.trusted)[0], loaded.meta.agent)
        if agent.model and not args.model:
            settings = settings.model_copy(update={"model": agent.model})
        try:
            built = context_for(project).build(conv_id, loaded.messages, settings, mode,
                                            args.budget, agent=agent)
        except BudgetError as e:
            raise CliError(str(e)) from None
    finally:
        project.close()
    if args.json:
        from core.json_text import document

        sys.stdout.write(document({"messages": built.messages, "tools": built.tools,
                                   "report": built.report.to_json()}) + "\n")
        return EXIT_OK
    from core.context.report_text import cli_lines

    positions = {m.id: n for n, m in enumerate(loaded.messages, start=1)}
    print("\n".join(cli_lines(built.report, positions, len(built.messages))))
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    project = open_project(args.project, create=False, read_only=True)
    try:
        rows = project.conversations.list()
        pending = {r.id for r in rows if project.conversations.pending_partial(r.id) is not None}
    except (StoreError, OSError) as e:
        raise _store_failure(e, "the conversations cannot be listed") from None
    finally:
        project.close()
    if not rows:
        print("no conversations yet", file=sys.stderr)
    for r in rows:
        when = r.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        flag = "  [an interrupted answer is pending]" if r.id in pending else ""
        if r.branch_of is not None:
            flag += f"  [a branch of {r.branch_of}]"
        print(for_stream(
            f"{r.id}  {when}  {r.message_count:>6} msgs  {r.mode:<5}  {r.title}{flag}",
            sys.stdout))
    return EXIT_OK


def cmd_agents(args: argparse.Namespace) -> int:
    """The project's agents (the default first), and what contains their commands."""
    from core.agents import load_agents
    from core.tools import tools_for
    from core.tools.sandbox import detect_sandbox

    project = open_project(args.project, create=False, read_only=True)
    try:
        agents, problems = load_agents(project.state, project.trusted)
    finally:
        project.close()
    for problem in problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    every = [t.name for t in tools_for("agent")]
    for agent in agents:
        tools = ", ".join(agent.tools) if agent.tools is not None else "every tool of the mode"
        model = f"  model {agent.model}" if agent.model else ""
        print(for_stream(f"{agent.name}{model}\n  tools: {tools}", sys.stdout))
        about = agent.description or agent.instructions
        if about:
            print(for_stream(f"  {' '.join(about.split())[:200]}", sys.stdout))
    print(f"tools in agent mode: {', '.join(every)}", file=sys.stderr)
    print(f"commands run with: {detect_sandbox().describe()}", file=sys.stderr)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """The project's MCP servers: each one started, its state, and its tools with what each
    schema costs in a request (exit 1 when one failed)."""
    import asyncio
    import json

    from core.llm.tokens import TokenCounter
    from core.mcp import McpHub
    from core.settings import config_dir
    from core.tools.mcp_tools import McpToolset

    project = open_project(args.project, create=False, read_only=True, trust=args.trust)
    try:
        hub = McpHub.for_project(project.root, project.state, config_dir(),
                                 project.trusted_servers())
    finally:
        project.close()
    for problem in hub.problems:
        print(for_stream(f"workbench: warning: {problem}", sys.stderr), file=sys.stderr)
    if not hub.servers and not project.trust.restricted:
        print("no MCP servers: add them to .workbench/mcp.json (or mcp.json in the config "
              "folder) as {\"mcpServers\": {...}}", file=sys.stderr)
    if not hub.servers:
        return EXIT_FAIL if hub.problems else EXIT_OK

    async def start() -> None:
        try:
            await hub.start()
        finally:
            await hub.close_keeping_states()

    asyncio.run(start())
    counter = TokenCounter("o200k_base")
    schemas = {t.name: t.schema() for t in McpToolset(hub).tools()}  # as a request has them
    failed = bool(hub.problems)
    for s in hub.servers.values():
        failed |= s.status == "failed"
        print(for_stream(f"{s.name}  {s.config.describe()}\n  {s.line()}", sys.stdout))
        for t in s.tools:
            tokens = counter.text(json.dumps(schemas.get(t.name, {}), sort_keys=True))
            mark = "  (read-only)" if t.read_only else ""
            print(for_stream(f"  {t.name:<40} {tokens:>6,} tokens{mark}", sys.stdout))
    return EXIT_FAIL if failed else EXIT_OK


# --- helpers -----------------------------------------------------------------------------------


def open_project(path: Path, *, create: bool, read_only: bool = False,
                 trust: bool = False) -> Project:
    """The project at `path`; `trust`: the user passed --trust (what it ships is trusted,
    exactly as it is now, and said on stderr)."""
    try:
        project = Project.open(path, create=create, read_only=read_only)
    except ProjectPathError as e:
        raise CliError(str(e)) from None
    for link in project.links_removed:
        print(for_stream(f"workbench: warning: removed a symbolic link the project's .workbench/ "
                         f"held ({link}); the app never follows one there", sys.stderr),
              file=sys.stderr)
    if trust and project.trust.restricted:
        try:
            project.trust_now()
        except OSError as e:
            project.close()
            raise CliError(f"the trust could not be kept ({e.strerror or e})") from None
        print(for_stream("workbench: trusted (--trust): " + "; ".join(project.trust.items),
                         sys.stderr), file=sys.stderr)
    return project


def require_trusted(project: Project) -> None:
    """A command that sends requests: refused while the project, untrusted, chooses where they
    go (they would go elsewhere than it says, or to where it says without the user's word);
    its MCP servers are not started, and that is said."""
    verdict = project.trust
    if not verdict.restricted:
        return
    how = f"`workbench trust {project.root}` shows what it ships and trusts it, or pass --trust"
    if verdict.routing:
        project.close()
        raise CliError(for_stream(verdict.report(project.root), sys.stderr)
                       + f"\nworkbench: nothing was sent: the project is not trusted ({how}).")
    print(for_stream(f"workbench: warning: the project's MCP servers "
                     f"({', '.join(verdict.servers)}) are not started: the project is not "
                     f"trusted ({how})", sys.stderr), file=sys.stderr)


def cmd_trust(args: argparse.Namespace) -> int:
    """What the project ships that acts for the user; trusted on the user's word (a question
    on a terminal, or --yes), or the trust taken back (--revoke)."""
    project = open_project(args.project, create=False, read_only=True)
    try:
        verdict = project.trust
        if args.revoke:
            had = project.trust_store.forget(project.root)
            print(f"{project.root}: " + ("no longer trusted" if had else "was not trusted"))
            return EXIT_OK
        if not verdict.items:
            print(f"{project.root} ships nothing that acts on your behalf: there is nothing "
                  "to trust.")
            return EXIT_OK
        print(for_stream(verdict.report(project.root), sys.stdout))
        if verdict.trusted:
            print("You trust exactly these settings.")
            return EXIT_OK
        if not args.yes:
            if not (sys.stdin.isatty() and sys.stderr.isatty()):
                raise CliError("not trusted: run `workbench trust` on a terminal, or with "
                               "--yes, to trust exactly these settings")
            answer = input("Trust this project with exactly these settings? [y/N] ")
            if answer.strip().casefold() not in ("y", "yes"):
                print("Not trusted: none of it is used.")
                return EXIT_FAIL
        project.trust_store.trust(project.root, verdict)
        print("Trusted. A change to any of these settings (a git pull, an edit) asks again.")
        return EXIT_OK
    finally:
        project.close()


def require_writable(project: Project) -> None:
    if project.read_only_reason is not None:
        project.close()
        raise CliError(project.read_only_reason)


def resolve_conversation(store: ConversationStore, conv: str) -> str:
    try:
        return store.resolve(conv)
    except ConversationNotFound as e:
        raise CliError(str(e)) from None


def context_for(project: Project) -> ProjectContext:
    """The project's one context (no model library behind it: `workbench context` and the
    other commands that send nothing stay quick)."""
    from core.context.service import ProjectContext
    from core.factory import calibration_for
    from core.settings import SettingsStore

    return ProjectContext.for_project(project, calibration_for(SettingsStore()))


def engine_for(project: Project) -> Engine:
    from core.factory import build_engine

    return build_engine(project, context_for(project))


def read_stdin_text() -> str:
    """The message from standard input, refusing bytes that are not UTF-8 text."""
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else \
        sys.stdin.read().encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CliError(f"standard input is not UTF-8 text (bad byte at offset {e.start}); "
                       "nothing was sent") from None


def _warn_routing_left_out(project: Project) -> None:
    """An untrusted project's provider settings are not used: said once, on stderr."""
    if project.trust.restricted and project.trust.routing:
        print(for_stream("workbench: warning: the project is not trusted, so its provider "
                         "settings are left out of this build (`workbench trust "
                         f"{project.root}`)", sys.stderr), file=sys.stderr)


def _store_failure(e: StoreError | OSError, outcome: str) -> CliError:
    """A store problem as the one sentence `workbench` prints (exit 1)."""
    if isinstance(e, StoreError):
        return CliError(str(e))
    from core.store.errors import describe_os_error

    where = f" ({Path(e.filename).name})" if e.filename else ""
    return CliError(f"{describe_os_error(e)}{where}; {outcome}")

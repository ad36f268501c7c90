"""The commands that run turns: `send`, `continue`, `retry` (and, through `prepare_turn` and
`print_turn`, `run`): the project opened and checked, the answer printed as it streams."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app import start_up
from app.cli.commands import (
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    CliError,
    engine_for,
    open_project,
    read_stdin_text,
    require_trusted,
    require_writable,
    resolve_conversation,
)
from app.cli.run_progress import run_progress
from app.cli.term import for_stream
from core.redact import StreamRedactor, redact
from core.store.conversations import ConversationMeta, ConversationStore
from core.store.project import Project

if TYPE_CHECKING:
    from core.agents import Agent
    from core.attachments import Attachment
    from core.engine import Engine, EngineEvent, TurnOptions  # litellm behind it: imported late
    from core.model import Mode
    from core.settings import LLMSettings
    from core.tools.runner import ApprovalPolicy


def cmd_send(args: argparse.Namespace) -> int:
    text = read_stdin_text() if args.text == "-" else args.text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
        raise CliError("the message is not valid UTF-8 text; nothing was sent") from None
    if "\x00" in text:
        raise CliError("the message contains NUL bytes (binary data?); nothing was sent")
    if not text.strip() and not args.attach:
        raise CliError("the message is empty", EXIT_USAGE)
    return _run_turn(args, "send", text)


def cmd_continue(args: argparse.Namespace) -> int:
    return _run_turn(args, "continue")


def cmd_retry(args: argparse.Namespace) -> int:
    return _run_turn(args, "retry")


def _run_turn(args: argparse.Namespace, action: str, text: str = "") -> int:
    """send / continue / retry: one turn, its answer printed as it streams."""
    from core.engine import NothingToContinue, NothingToRetry

    turn = prepare_turn(args, create=(action == "send"), title="")
    engine, conv_id, settings, options = turn.engine, turn.conv_id, turn.settings, turn.options
    try:
        if action == "send":
            attached = _attach(turn, getattr(args, "attach", []), text)
            _within_cap(turn, text)
            events = engine.send(conv_id, text, settings, options, attached)
        elif action == "continue":
            _within_cap(turn, "")
            events = engine.continue_(conv_id, settings, options)
        else:
            _within_cap(turn, "")
            events = engine.retry(conv_id, settings, options)
        if options.mode == "run":  # in a run, the turn joins its step and the run goes on
            from core.runs.driver import RunDriver

            driver = RunDriver(engine)
            run = driver.state(conv_id)
            if run is not None and run.open:
                return print_turn(closing(driver.drive_after(conv_id, events, settings, options),
                                          engine), run_progress([], args.project, conv_id))
        code = print_turn(closing(events, engine))
        if code == EXIT_OK:
            _title(turn, getattr(args, "title_model", False))
        return code
    except (NothingToContinue, NothingToRetry) as e:
        raise CliError(str(e)) from None
    finally:
        if turn.created:  # `--new` whose first message could not be saved: nothing to keep
            turn.project.conversations.discard_if_empty(conv_id)
        turn.project.close()


def _within_cap(turn: Turn, text: str) -> None:
    """A spending cap (core.cost) that the conversation has reached, or that the next request
    would pass, stops the send here: exit 2, nothing on the wire."""
    settings, options = turn.settings, turn.options
    if settings.cost_cap is None and settings.project_cost_cap is None:
        return
    from core.cost import cap_refusal

    store, context = turn.project.conversations, turn.engine.context
    history = store.load(turn.conv_id).messages
    built = context.build(turn.conv_id, history, settings, options.mode, agent=options.agent,
                          what_if=True)
    tokens = built.report.used + context.counter(settings.model).text(text)
    why = cap_refusal(store, turn.conv_id, settings.model, settings.cost_cap,
                      settings.project_cost_cap, tokens)
    if why:
        raise CliError(f"{why}; nothing was sent. Raise the cap (WORKBENCH_COST_CAP, or "
                       "Settings → Cost cap) to send it.", EXIT_TURN_ERROR)


def _attach(turn: Turn, paths: list[str], text: str) -> list[Attachment]:
    """`send --attach`: the files read and checked before anything is sent (a binary file, an
    image for a model without vision, more than the window has room for: refused, with why)."""
    from core.attachments import (
        AttachmentError,
        accepts_images,
        attach_file,
        images_refused,
        room_problem,
    )
    from core.context.builder import BudgetError

    if not paths:
        return []
    context, settings = turn.engine.context, turn.settings
    if context.attachments is None:
        raise CliError("this project cannot keep attachments; nothing was sent")
    counter = context.counter(settings.model)
    out = []
    for path in paths:
        try:
            out.append(attach_file(Path(path).expanduser(), context.attachments, counter,
                                   turn.project.root))
        except AttachmentError as e:
            raise CliError(f"{e}; nothing was sent") from None
    if any(a.kind == "image" for a in out) and not accepts_images(settings.model,
                                                                  settings.images):
        raise CliError(f"{images_refused(settings.model, settings.images)}; nothing was sent")
    try:
        room = context.message_room(turn.conv_id, settings, turn.options.mode,
                                    turn.options.agent) - counter.text(text)
    except BudgetError as e:
        raise CliError(f"{e}; nothing was sent") from None
    problem = room_problem(out, room)
    if problem:
        raise CliError(f"{problem}; nothing was sent")
    return out


async def closing(events: AsyncIterator[EngineEvent], engine: Engine
                  ) -> AsyncIterator[EngineEvent]:
    """A command's turn, then the project's MCP servers stopped (on the turn's own loop, where
    they were started)."""
    try:
        async for event in events:
            yield event
    finally:
        await engine.close()


def _title(turn: Turn, by_model: bool) -> None:
    """Title an untitled conversation after its first answer (core/titles.py): from the
    opening words, at once, unless a model's title was asked for (`--title-model`, or automatic
    titles set on in Settings, the project or WORKBENCH_AUTO_TITLE): a command never waits for
    a title it was not asked to wait for."""
    from core.titles import write_title

    asked = by_model or (turn.settings.auto_title
                         and turn.settings.sources.get("auto_title", "default") != "default")
    settings = turn.settings.model_copy(update={"auto_title": asked})

    async def run() -> None:
        async for ev in write_title(turn.project.conversations, turn.engine.client,
                                    turn.conv_id, settings):
            print(for_stream(f"workbench: titled “{ev.title}”", sys.stderr), file=sys.stderr)

    asyncio.run(run())


@dataclass
class Turn:
    """What a turn from the command line needs, once the project is open and checked."""

    project: Project
    engine: Engine
    conv_id: str
    settings: LLMSettings
    options: TurnOptions
    created: bool = False  # the conversation was made for this turn (`--new`)


def prepare_turn(args: argparse.Namespace, *, create: bool, title: str,
                 mode: Mode | None = None) -> Turn:
    """Open the project, resolve the settings, the conversation (or make it: `--new`), the
    agent and the approval policy from the command's flags. `mode`: forced (run)."""
    _check_limits(args)
    from core.engine import TurnOptions

    project = open_project(args.project, create=create, trust=args.trust)
    require_trusted(project)
    try:
        settings = _settings(args, project)
        _warm_up(settings)
        store = project.conversations
        require_writable(project)
        conv_id = _conversation(args, project, title, settings)
        engine = engine_for(project)
        meta = store.meta(conv_id)
        mode = mode or args.mode or meta.mode
        agent = _agent(args, project, meta.agent)
        _remember_choices(args, store, conv_id, meta, mode, agent)
    except BaseException:
        project.close()
        raise
    approve: ApprovalPolicy = args.approve or (
        "ask" if sys.stdin.isatty() and sys.stderr.isatty() else "never")
    return Turn(project, engine, conv_id, settings,
                TurnOptions(mode=mode, agent=agent, approve=approve),
                created=bool(getattr(args, "new", False)))


def _check_limits(args: argparse.Namespace) -> None:
    """The numbers the flags give are positive, or the command is a usage mistake."""
    if args.max_tokens is not None and args.max_tokens <= 0:
        raise CliError("--max-tokens must be a positive whole number", EXIT_USAGE)
    if args.timeout is not None and args.timeout <= 0:
        raise CliError("--timeout must be a positive number of seconds", EXIT_USAGE)
    if args.step_limit is not None and args.step_limit <= 0:
        raise CliError("--step-limit must be a positive whole number", EXIT_USAGE)


def _settings(args: argparse.Namespace, project: Project) -> LLMSettings:
    """The flags over the project's settings over the user's."""
    from core.settings import SettingsError, SettingsStore, resolve_llm_settings

    cli_values = {"model": args.model, "api_base": args.api_base,
                  "max_output_tokens": args.max_tokens, "request_timeout": args.timeout,
                  "context_window": args.context_window,
                  "step_limit": args.step_limit}
    try:
        return resolve_llm_settings(cli=cli_values, project=project.overrides,
                                    global_settings=SettingsStore().load())
    except SettingsError as e:
        raise CliError(str(e)) from None


def _warm_up(settings: LLMSettings) -> None:
    """Start loading what the request will need (litellm or the openai SDK, the token encoding)
    in the background, in parallel with the rest of the preparation; the collector is on again
    once the transport is in (`app.start_up`)."""
    from core.llm.model_map import speaks_openai
    from core.llm.runtime import start_background_import

    # litellm's import is long, the openai SDK's (a model that speaks the OpenAI protocol goes
    # through it, without litellm) the longest step of a cold send still: started now, it
    # imports while the project opens and the conversation is written (waits on the disk).
    model = settings.model if speaks_openai(settings.model) else None
    start_up.collector_after(start_background_import(model=model))
    from core.llm.tokens import encoding_for_model, get_encoding

    threading.Thread(target=get_encoding, args=(encoding_for_model(settings.model),),
                     daemon=True).start()


def _conversation(args: argparse.Namespace, project: Project, title: str,
                  settings: LLMSettings) -> str:
    """The id of the conversation `--conversation` names, or of the one `--new` makes."""
    store = project.conversations
    if getattr(args, "new", False):
        conv_id = store.create(title=args.title or title or None, model=settings.model).id
        print(f"conversation {conv_id}", file=sys.stderr)
        return conv_id
    return resolve_conversation(store, args.conversation)


def _agent(args: argparse.Namespace, project: Project, current: str | None) -> Agent:
    """The agent `--agent` names (a usage mistake if the project has none of that name), else
    the conversation's; the project's problems with its agents are warned about."""
    from core.agents import find_agent, load_agents

    agents, problems = load_agents(project.state, project.trusted)
    for problem in problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    agent = find_agent(agents, args.agent or current)
    if args.agent and agent.name.casefold() != args.agent.casefold():
        raise CliError(f"there is no agent {args.agent!r}; the project has: "
                       + ", ".join(a.name for a in agents), EXIT_USAGE)
    return agent


def _remember_choices(args: argparse.Namespace, store: ConversationStore, conv_id: str,
                      meta: ConversationMeta, mode: Mode, agent: Agent) -> None:
    """The mode, agent and network permission this turn uses become the conversation's."""
    changes: dict[str, object] = {}
    if mode != meta.mode:
        changes["mode"] = mode
    if args.agent and agent.name != meta.agent:
        changes["agent"] = agent.name
    if args.allow_network and not store.network_allowed(meta):
        changes["allow_network"] = True
    if changes:
        store.update_meta(conv_id, **changes)


def print_turn(events: AsyncIterator[EngineEvent],
               on_other: Callable[[EngineEvent, Callable[[str], None]], None] | None = None
               ) -> int:
    """Print a turn's events as they come: the answer on stdout, tools, approvals and
    problems on stderr. `on_other(event, note)`: events this does not know (a run's).
    Returns the exit code: 0 when the last turn ended well, 2 when it ended in an error entry,
    1 when something could not be saved."""
    from app.cli.agent import ask_on_terminal, tool_outcome
    from core.engine import (
        EntryAppended,
        QuestionAsked,
        Retrying,
        SaveFailed,
        StoreNotice,
        StreamText,
        ToolStarted,
        TurnFinished,
    )

    saved_ok = True
    line_open = False  # the answer's text has no newline yet

    def note(text: str) -> None:
        nonlocal line_open
        if line_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            line_open = False
        print(text, file=sys.stderr)

    async def run() -> int:
        nonlocal saved_ok, line_open
        status = "error"
        shown = StreamRedactor()  # no key printed, even one split across two pieces
        async for event in events:
            if isinstance(event, StreamText):
                sys.stdout.write(shown.feed(event.text))
                sys.stdout.flush()
                line_open = not event.text.endswith("\n")
                continue
            if held := shown.end():  # the answer's text paused (a call, the end): all of it
                sys.stdout.write(held)
                sys.stdout.flush()
            if isinstance(event, ToolStarted):
                note(f"workbench: tool {event.name} {for_stream(redact(event.key), sys.stderr)}")
            elif isinstance(event, EntryAppended) and event.message.role == "tool":
                note(f"workbench:   {tool_outcome(event.message)}")
            elif isinstance(event, QuestionAsked):
                await ask_on_terminal(event)
            elif isinstance(event, StoreNotice):
                print(f"workbench: warning: {event.text}", file=sys.stderr)
            elif isinstance(event, SaveFailed):
                saved_ok = False
                if event.what == "your message":
                    print(f"workbench: {event.cause}: your message could not be saved, so "
                          "nothing was sent", file=sys.stderr)
                else:
                    sys.stdout.write("\n")
                    print(f"workbench: {event.cause}: {event.what} is printed above but could "
                          "not be saved in the project", file=sys.stderr)
            elif isinstance(event, Retrying):
                print(f"workbench: {event.cause} Retrying in {event.delay:.0f} s "
                      f"(attempt {event.attempt} of {event.of}; Ctrl+C stops)", file=sys.stderr)
            elif isinstance(event, TurnFinished):
                status = event.status
                if status == "ok" and (line_open or event.message.text()):
                    sys.stdout.write("\n")
                    line_open = False
                elif event.message.error is not None and saved_ok:
                    if event.message.text():
                        sys.stdout.write("\n")
                    line_open = False
                    print(f"workbench: {event.message.error.message}", file=sys.stderr)
            elif on_other is not None:
                on_other(event, note)
        sys.stdout.write(shown.end())
        if not saved_ok:
            return EXIT_FAIL
        if status == "stopped":  # on the command line, only Ctrl+C stops a turn
            return EXIT_INTERRUPTED
        return EXIT_OK if status == "ok" else EXIT_TURN_ERROR

    return asyncio.run(run())

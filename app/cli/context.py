"""`workbench compact`, `workbench pin|unpin|exclude|include` and `workbench fork`: steering what
the model sees."""

from __future__ import annotations

import argparse
import asyncio
import sys

from app import start_up
from app.cli.commands import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    CliError,
    context_for,
    engine_for,
    open_project,
    require_trusted,
    require_writable,
    resolve_conversation,
)
from core.model import ConversationMessage
from core.store.project import Project


def cmd_compact(args: argparse.Namespace) -> int:
    """Write (or extend) the conversation's summary now; the next request uses it in place of
    what it covers. Exit 0 with the numbers, 2 when the summarizer failed (the log unchanged),
    1 when there is nothing to summarize."""
    from core.llm.runtime import start_background_import

    start_up.collector_after(start_background_import())
    from core.engine import CompactionFinished, CompactionProgress, CompactionStarted
    from core.settings import SettingsError, SettingsStore, resolve_llm_settings

    if args.max_tokens is not None and args.max_tokens <= 0:
        raise CliError("--max-tokens must be a positive whole number", EXIT_USAGE)
    project = open_project(args.project, create=False, trust=args.trust)
    require_trusted(project)
    try:
        require_writable(project)
        conv_id = resolve_conversation(project.conversations, args.conversation)
        try:
            settings = resolve_llm_settings(
                cli={"model": args.model, "api_base": args.api_base,
                     "max_output_tokens": args.max_tokens, "request_timeout": args.timeout,
                     "context_window": args.context_window,
                     "summary_model": args.summary_model},
                project=project.overrides, global_settings=SettingsStore().load())
        except SettingsError as e:
            raise CliError(str(e)) from None
        engine = engine_for(project)
        outcome: list[CompactionFinished] = []

        async def run() -> None:
            async for event in engine.summarize(conv_id, settings, focus=args.focus):
                if isinstance(event, CompactionStarted):
                    calls = f" in {event.calls} calls" if event.calls > 1 else ""
                    print(f"workbench: summarizing {event.entries:,} entries with "
                          f"{event.model}{calls}…", file=sys.stderr)
                elif isinstance(event, CompactionProgress) and sys.stderr.isatty():
                    print(f"\r  {event.chars:,} characters ({event.call}/{event.calls})",
                          end="", file=sys.stderr)
                elif isinstance(event, CompactionFinished):
                    outcome.append(event)

        asyncio.run(run())
    finally:
        project.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    done = outcome[-1] if outcome else None
    if done is None or done.status != "ok":
        message = done.message if done is not None else "the summary did not finish"
        raise CliError(message, EXIT_FAIL if done is not None and done.status == "skipped"
                       else EXIT_TURN_ERROR)
    assert done.entry is not None
    print(done.message)
    print(f"summary {done.entry.id} covers {done.covered:,} entries: {done.tokens_before:,} -> "
          f"{done.tokens_after:,} tokens" + (f", ${done.cost:.4f}" if done.cost else ""))
    return EXIT_OK


def cmd_annotate(args: argparse.Namespace) -> int:
    """pin / unpin / exclude / include one entry (an id or a unique prefix of one): appended to
    the log as an annotation; no line is rewritten."""
    from core.model import ANNOTATIONS, annotation

    action = args.command
    project, conv_id, entry = _open_entry(args)
    try:
        field, value = ANNOTATIONS[action]
        if getattr(entry, field) == value:
            state = {"pin": "pinned", "unpin": "not pinned", "exclude": "excluded",
                     "include": "included"}[action]
            print(f"entry {entry.id} is already {state}; nothing changed")
            return EXIT_OK
        failure = context_for(project).writer.write(conv_id, [annotation(entry.id, action)],
                                                 "the change").failure
        if failure is not None:
            raise CliError(f"not changed: {failure.cause}")
    finally:
        project.close()
    done = {"pin": "pinned: always sent", "unpin": "unpinned", "exclude":
            "excluded: never sent", "include": "included again"}[action]
    print(f"entry {entry.id} {done}")
    return EXIT_OK


def _open_entry(args: argparse.Namespace) -> tuple[Project, str, ConversationMessage]:
    """The project, open for writing (the caller closes it), the conversation and the entry
    that `--conversation` and ENTRY_ID name."""
    project = open_project(args.project, create=False)
    try:
        require_writable(project)
        conv_id = resolve_conversation(project.conversations, args.conversation)
        return project, conv_id, _entry(project.conversations.load(conv_id).messages, args.entry)
    except BaseException:
        project.close()
        raise


def _entry(messages: list[ConversationMessage], given: str) -> ConversationMessage:
    """The entry an id or a unique prefix of one names (annotations are not entries to name)."""
    wanted = given.strip()
    found = [m for m in messages if m.id.startswith(wanted) and m.kind != "annotation"] \
        if wanted else []
    if len(found) != 1:
        raise CliError(f"no entry {wanted!r} in this conversation" if not found else
                       f"{wanted!r} names {len(found)} entries; give more of the id")
    return found[0]


def cmd_fork(args: argparse.Namespace) -> int:
    """A new conversation (a branch) whose history is this one's up to and including the entry
    (with --before, up to just before it); the original is not changed. Prints the new id."""
    project, conv_id, entry = _open_entry(args)
    try:
        ids = [m.id for m in project.conversations.load(conv_id).messages]
        meta = project.conversations.fork(conv_id, entry.id, args.title, before=args.before)
        count = project.conversations.message_count(meta.id)
    finally:
        project.close()
    where = "before" if args.before else "at"
    at = ids.index(entry.id)
    asked = ids[at - 1] if args.before and at else "" if args.before else entry.id
    moved = "" if meta.branch_at == asked else \
        " (the cut moved so that no tool call is parted from its result)"
    print(f"forked {where} entry {entry.id}{moved}: {meta.title!r} with {count} entries",
          file=sys.stderr)
    print(meta.id)
    return EXIT_OK


def cmd_forget_window(args: argparse.Namespace) -> int:
    """Forget the context window learned for the project's model at its server (or the given
    ones), with what that server was found to need: the next request asks again."""
    from core.factory import calibration_for
    from core.llm import compat
    from core.settings import SettingsError, SettingsStore, resolve_llm_settings

    project = open_project(args.project, create=False, trust=args.trust)
    try:
        store = SettingsStore()
        settings = resolve_llm_settings(
            cli={"model": args.model, "api_base": args.api_base}, project=project.overrides,
            global_settings=store.load())
    except SettingsError as e:
        raise CliError(str(e)) from None
    finally:
        project.close()
    where = f" at {settings.api_base}" if settings.api_base else ""
    forgot = calibration_for(store).forget_window(settings.model, settings.api_base)
    if settings.api_base:
        compat.forget(settings.api_base, settings.model)
    print(f"forgot the window learned for {settings.model}{where}" if forgot else
          f"no window was learned for {settings.model}{where}; nothing to forget")
    return EXIT_OK

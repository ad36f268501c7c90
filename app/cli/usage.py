"""`workbench usage`: what a project's conversations cost, from the usage kept with each answer
(core.cost)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from app.cli.commands import EXIT_OK, EXIT_USAGE, CliError, open_project, resolve_conversation
from app.cli.term import for_stream
from core.cost import Spend, conversation_spend, money


def _since(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--since must be a date (2026-11-26) or a time "
                       f"(2026-11-26T09:00), not {text!r}", EXIT_USAGE) from None
    return when if when.tzinfo is not None else when.astimezone(UTC)


def cmd_usage(args: argparse.Namespace) -> int:
    """Per conversation and in total: requests, prompt/cached/completion tokens, cost in USD."""
    since = _since(args.since)
    project = open_project(args.project, create=False, read_only=True)
    try:
        store = project.conversations
        rows = sorted(store.list(), key=lambda r: r.created_at)  # origins before their branches
        if args.conversation:
            wanted = resolve_conversation(store, args.conversation)
            rows = [r for r in rows if r.id == wanted]
        seen: set[str] = set()
        spent = [(r, conversation_spend(store, r.id, since, seen)) for r in rows]
    finally:
        project.close()
    total = Spend()
    for _row, s in spent:
        total.merge(s)
    if args.json:
        print(json.dumps({
            "conversations": [{"id": r.id, "title": r.title, **s.as_json()} for r, s in spent],
            "total": total.as_json()}, indent=2))
        return EXIT_OK
    print(for_stream(f"{'conversation':<12}  {'requests':>8}  {'prompt':>10}  {'cached':>10}  "
                     f"{'completion':>10}  {'cost':>10}  title", sys.stdout))
    for r, s in spent:
        print(for_stream(_line(r.id[:12], s) + f"  {r.title}", sys.stdout))
    print(for_stream(_line("total", total), sys.stdout))
    notes = []
    if total.unpriced:
        notes.append(f"{total.unpriced} request(s) of a model without a price (local, or not in "
                     f"litellm's map): not counted in the cost")
    if total.estimated:
        notes.append(f"{total.estimated} request(s) whose usage the provider did not report "
                     f"(counted here)")
    if total.imported:
        notes.append(f"{total.imported} request(s) came with an import")
    if total.saved:
        notes.append(f"the prompt cache saved {money(total.saved)}")
    for note in notes:
        print(for_stream(f"note: {note}", sys.stderr), file=sys.stderr)
    return EXIT_OK


def _line(name: str, s: Spend) -> str:
    return (f"{name:<12}  {s.requests:>8,}  {s.prompt:>10,}  {s.cached:>10,}  "
            f"{s.completion:>10,}  {money(s.usd if s.requests > s.unpriced else None):>10}")

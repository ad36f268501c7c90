"""Scenarios that need two requests at once in one process (as the window makes them), run
against a real server by `make real-llm` and against the loopback server's llama-cpp-python
profile by `make test` (tests/integration/test_local_compat.py): the same code either way."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from core.context.calibration import Calibration
from core.context.service import ProjectContext
from core.engine import CompactionFinished, Engine, StreamText, TurnFinished, TurnOptions
from core.factory import build_engine
from core.model import ConversationMessage
from core.settings import LLMSettings
from core.store.project import Project

DEADLINE_S = 600.0
STORY = "Write a long story about a lighthouse keeper and a storm."


@dataclass
class SendAndCompact:
    """What a send and a summary asked while its answer streams came to."""

    send_status: str  # the turn's: ok, or error (with `send_error`)
    send_error: str
    answer: str  # the text that arrived
    compact_status: str  # the summary's: ok, failed (with `compact_message`), ...
    compact_message: str


def history(turns: int) -> list[ConversationMessage]:
    """A conversation worth summarizing: `turns` short exchanges about one project."""
    out = []
    for n in range(turns):
        out.append(ConversationMessage(role="user", content=(
            f"Note {n}: the parser keeps line numbers; the lexer reports column {n} errors.")))
        out.append(ConversationMessage(role="assistant", content=(
            f"Noted: line numbers kept, column {n} errors reported by the lexer.")))
    return out


def send_and_compact(folder: Path, model: str, api_base: str, max_tokens: int = 200,
                     summary_tokens: int = 256) -> SendAndCompact:
    """A send in one conversation and, once its answer has begun, a summary of another (the
    window's `/compact` during a send), on one event loop against one server."""
    with Project.open(folder, create=True) as project:
        context = ProjectContext.for_project(project, Calibration(folder / "calibration.json"))
        engine = build_engine(project, context)
        chat = project.conversations.create("story").id
        older = project.conversations.create("notes").id
        project.conversations.append_many(older, history(6))
        settings = LLMSettings(model=model, api_base=api_base, max_output_tokens=max_tokens,
                               auto_retries=0, auto_title=False, auto_summary=False)
        summary_settings = settings.model_copy(update={"max_output_tokens": summary_tokens})
        return asyncio.run(asyncio.wait_for(
            _both(engine, chat, older, settings, summary_settings), DEADLINE_S))


async def _both(engine: Engine, chat: str, older: str, settings: LLMSettings,
                summary_settings: LLMSettings) -> SendAndCompact:
    begun = asyncio.Event()
    text: list[str] = []

    async def send() -> TurnFinished:
        last = None
        async for event in engine.send(chat, STORY, settings, TurnOptions()):
            if isinstance(event, StreamText):
                text.append(event.text)
                begun.set()
            last = event
        begun.set()  # an answer that never began: the summary goes ahead anyway
        assert isinstance(last, TurnFinished)
        return last

    async def compact() -> CompactionFinished:
        await begun.wait()
        last = None
        async for event in engine.summarize(older, summary_settings):
            last = event
        assert isinstance(last, CompactionFinished)
        return last

    turn, summary = await asyncio.gather(send(), compact())
    error = turn.message.error.message if turn.message.error is not None else ""
    await engine.close()
    return SendAndCompact(turn.status, error, "".join(text), summary.status, summary.message)

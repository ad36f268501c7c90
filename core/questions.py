"""The reply path: questions the engine asks the user (an approval, a choice) and their answers.

The engine runs on its own thread and loop; the window on another. A question carries a future
of the engine's loop: the engine yields it as an event and awaits the answer, the window answers
it from its own thread (`answer` hands the result to the engine's loop), and Stop cancels the
turn, which cancels the wait. Neither loop ever blocks on the other.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


class QuestionCancelled(Exception):
    """The question was withdrawn (the turn was stopped) before it was answered."""


@dataclass(eq=False)
class Question:
    """Attributes:
        text: the question, in one or two sentences.
        choices: the answers offered, first the default (e.g. ("Approve", "Deny")).
        detail: what the user needs to decide (a command, a diff), shown below the question.
    """

    text: str
    choices: tuple[str, ...]
    detail: str = ""
    kind: str = "question"  # "approval": a tool call waits for the user's permission
    note: str = field(default="", init=False)  # what the user added to the answer (a reason)
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop, repr=False)
    _future: asyncio.Future[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._future = self._loop.create_future()

    def answer(self, choice: str, note: str = "") -> None:
        """Answer from any thread; the first answer counts. `note`: what the user adds (the
        reason for a denial, which the model reads)."""
        if choice not in self.choices:
            raise ValueError(f"{choice!r} is not one of {self.choices}")
        self._loop.call_soon_threadsafe(self._settle, choice, note)

    def withdraw(self) -> None:
        """Cancel the question from any thread (the asker gets QuestionCancelled)."""
        self._loop.call_soon_threadsafe(self._settle, None)

    @property
    def answered(self) -> bool:
        return self._future.done()

    async def wait(self) -> str:
        """The user's choice (on the engine's loop). Cancelling the waiter withdraws it."""
        try:
            return await asyncio.shield(self._future)
        except asyncio.CancelledError:
            self._settle(None)
            raise

    def _settle(self, choice: str | None, note: str = "") -> None:
        if self._future.done():
            return
        self.note = note.strip()
        if choice is None:
            self._future.set_exception(QuestionCancelled(self.text))
            self._future.exception()  # retrieved: a withdrawn question is not an error to log
        else:
            self._future.set_result(choice)

"""What a turn reports and how it is asked to run: the engine's events, `TurnOptions`, and
`ToolSetup` (what running tools needs). Data only; `core.engine` runs turns and re-exports all
of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.agents import Agent
from core.context.builder import BuiltRequest
from core.model import ConversationMessage, Mode
from core.questions import Question
from core.tools.runner import ApprovalPolicy
from core.tools.runner import ToolStarted as ToolStarted  # an event like the others
from core.tools.sandbox import Sandbox, detect_sandbox
from core.tools.shell import tool_environment
from core.workflows.state import RunContext, RunState

# --- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryAppended:
    """A log entry is on disk (user, assistant or error)."""

    message: ConversationMessage


@dataclass(frozen=True)
class StreamText:
    """Text of the answer being streamed (not yet persisted as an entry)."""

    text: str


@dataclass(frozen=True)
class RequestStarted:
    model: str
    message_count: int


@dataclass(frozen=True)
class Retrying:
    """A transient failure before any text arrived: the same request goes again after
    `delay` seconds (the provider's Retry-After, or backoff)."""

    attempt: int
    of: int
    delay: float
    cause: str


@dataclass(frozen=True)
class StoreNotice:
    """Something the store found and repaired on the way (a torn line quarantined, an answer
    recovered from a crash), in one sentence for the user."""

    text: str


@dataclass(frozen=True)
class SaveFailed:
    """Entries that could not be written (a full disk): kept in memory by whoever shows them,
    to be saved again with `ConversationStore.append_many` once the cause is fixed.

    Attributes:
        message: one sentence for a window (it offers Save).
        what, cause: "the answer", "the disk is full": for other fronts to word their own.
    """

    message: str
    unsaved: list[ConversationMessage]
    what: str = ""
    cause: str = ""


@dataclass(frozen=True)
class RequestBuilt:
    """The request about to be sent, with its build report (again after an overflow rebuild)."""

    request: BuiltRequest


@dataclass(frozen=True)
class QuestionAsked:
    """The turn waits for the user: answer with `question.answer(choice)` from any thread."""

    question: Question


@dataclass(frozen=True)
class TurnOptions:
    """How a turn runs, beyond the conversation and the settings.

    Attributes:
        mode: the system prefix (chat, agent, run); the history is the same in every mode.
        run_context: in run mode, the workflow's directive and the active step's brief.
        agent: the persona and the tools it may use (None: the default agent).
        approve: writes and commands: ask the user, always run, or never run.
        step_limit: tool rounds before the turn pauses with a continuable entry (None: the
            settings' step_limit).
        network: commands may use the network (None: as the conversation says).
    """

    mode: Mode = "chat"
    run_context: RunContext | None = None
    agent: Agent | None = None
    approve: ApprovalPolicy = "ask"
    step_limit: int | None = None
    network: bool | None = None


@dataclass(frozen=True)
class TurnFinished:
    status: Literal["ok", "error", "stopped"]
    message: ConversationMessage


@dataclass(frozen=True)
class CompactionStarted:
    """A summary is being written: of how many entries, by which model, in how many calls."""

    entries: int
    model: str
    automatic: bool
    calls: int


@dataclass(frozen=True)
class CompactionProgress:
    """The summarizer's answer is arriving (call `call` of `calls`, `chars` so far)."""

    call: int
    calls: int
    chars: int


@dataclass(frozen=True)
class CompactionFinished:
    """The summary step is over.

    Attributes:
        status: ok (appended) | skipped (nothing worth summarizing) | failed (the log is
            unchanged; `message` says why) | stopped.
        message: one sentence for the user.
        entry: the summary entry when one was appended.
        covered: entries it stands for; tokens_before/after: what they cost in a request
            before and what the summary costs; cost: the summarizer's price, when known.
    """

    status: Literal["ok", "skipped", "failed", "stopped"]
    message: str
    entry: ConversationMessage | None = None
    covered: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    cost: float | None = None
    automatic: bool = False

    @property
    def freed(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)


@dataclass(frozen=True)
class RunUpdated:
    """A run moved on (started, a step finished, paused, ended ...): a snapshot of its state,
    and why the driver stopped when it did (None while it goes on)."""

    conv_id: str
    state: RunState | None
    stopped: str | None = None


EngineEvent = (EntryAppended | StreamText | RequestBuilt | RequestStarted | Retrying | StoreNotice
               | SaveFailed | QuestionAsked | ToolStarted | TurnFinished | CompactionStarted
               | CompactionProgress | CompactionFinished | RunUpdated)


@dataclass(frozen=True)
class ToolSetup:
    """What running tools needs: the project folder and how commands are contained.

    Attributes:
        root: the project folder; state: its `.workbench`.
        sandbox: detected once (bubblewrap, or none and why).
        env: the environment commands get (without secrets).
    """

    root: Path
    state: Path
    sandbox: Sandbox
    env: dict[str, str] | None = None

    @classmethod
    def for_folder(cls, root: Path, state: Path) -> ToolSetup:
        return cls(root.resolve(), state, detect_sandbox(), env=tool_environment())


DEFAULT_TURN = TurnOptions()

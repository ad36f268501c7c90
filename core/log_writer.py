"""The one log writer: every entry reaches a conversation's log through `LogWriter.write`.

Answers, errors, tool results, aborted calls, run starts and controls, annotations (pin,
exclude), summaries and entries the user saves again after a full disk all go through here, so
what must happen to every append happens in one place:

- a run-mode entry is tagged with the run and the step it belongs to (the step a request was
  built for keeps its answer and tool results, even if the user skipped the step meanwhile);
- an answer's crash sidecar is cleared once the answer is an entry, and written with its text
  when the entry could not be (the next open recovers it);
- a failed write never raises: it comes back as `SaveFailed` with the unsaved entries, so the
  caller can show them and offer Save;
- a run's cache file (`.workbench/runs/<id>.json`) follows every run control, also one made
  while no turn runs;
- no secret is written: the keys in use and key-shaped strings are replaced by a marker in every
  entry (a tool that read `.env`, an answer quoting a key, a key pasted by the user), and in the
  crash sidecar, so none reaches the log, an export, a kept request or the next request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from core.approval_seal import ApprovalSeal
from core.model import ContentPart, ConversationMessage, TextPart, ToolCall
from core.redact import MARK, known, redact, remember
from core.store.conversations import ConversationStore
from core.store.errors import StoreError, StoreWriteError, describe_os_error
from core.turn_events import EngineEvent, EntryAppended, SaveFailed, StoreNotice
from core.workflows.state import RunState

SAVE_FAILED = ("Could not save {what} ({cause}): it is kept in memory, shown here. Free some "
               "space (or fix the folder's permissions), then press Save.")

Tags = dict[str, str | None]


@dataclass
class Written:
    """What a write did, as the events to report (`StoreNotice`s, then one `EntryAppended`
    per entry; or one `SaveFailed`).

    Attributes:
        entries: the entries as written (tagged), in order.
        events: what to report.
    """

    entries: list[ConversationMessage]
    events: list[EngineEvent] = field(default_factory=list)

    @property
    def failure(self) -> SaveFailed | None:
        return next((e for e in self.events if isinstance(e, SaveFailed)), None)

    @property
    def ok(self) -> bool:
        return self.failure is None


class LogWriter:
    """Attributes:
        store: the project's conversations.
    """

    def __init__(self, store: ConversationStore,
                 run_state: Callable[[str], RunState | None] | None = None,
                 sync_run_file: Callable[[str, RunState], str | None] | None = None,
                 seal: ApprovalSeal | None = None) -> None:
        """`run_state(conv_id)`: the conversation's latest run (the project context's replay);
        `sync_run_file(conv_id, run)`: brings the run's cache file up to date, a sentence when
        it said something else (core.workflows.run_files; None: no run files are kept);
        `seal`: marks an allowance "for this conversation" as the app's own (without one, none
        is honoured)."""
        self.store = store
        self.seal = seal
        self._run_state = run_state
        self._sync_run_file = sync_run_file
        self._request_tags: dict[str, Tags] = {}

    def add_secrets(self, secrets: Iterable[str | None]) -> None:
        """Keys in use beyond the environment's (one from the keyring, say): never written,
        sent or printed (`core.redact.remember`)."""
        remember(secrets)

    def remembered(self, conv_id: str, entry: ConversationMessage) -> bool:
        """`entry` remembers an allowance this app wrote (not one a file in the project
        could carry)."""
        return self.seal is not None and self.seal.holds(conv_id, entry)

    def secrets(self) -> list[str]:
        """The keys in use (the environment's secret-named values, the requests' own)."""
        return known()

    def redacted(self, msg: ConversationMessage) -> ConversationMessage:
        """`msg` without secrets (itself when it has none)."""
        return redact_entry(msg)

    def expect(self, conv_id: str, tags: Tags | None) -> None:
        """The run and step the conversation's next request is built for (None: not a run's):
        its answer and tool results are tagged with them."""
        if tags is None:
            self._request_tags.pop(conv_id, None)
        else:
            self._request_tags[conv_id] = tags

    def tagged(self, conv_id: str, msg: ConversationMessage) -> ConversationMessage:
        """`msg`, made in run mode, tagged with the run and the step it belongs to."""
        if msg.mode != "run" or msg.run_id is not None:
            return msg
        tags = self._request_tags.get(conv_id) if msg.role != "user" else None
        if tags is None:  # the user's message joins the step active now
            run = self._run_state(conv_id) if self._run_state is not None else None
            if run is None or not run.open:
                return msg
            tags = run.tags()
        return msg.model_copy(update=tags)

    def write(self, conv_id: str, msgs: Sequence[ConversationMessage], what: str) -> Written:
        """Append `msgs` in one durable write (all or none). Never raises for a failed write:
        the result says it (`SaveFailed` with the entries, the text of an answer kept in the
        crash sidecar where space allows). `what` names the entries for the user ("the
        answer")."""
        entries = [self.redacted(self.tagged(conv_id, m)) for m in msgs]
        if self.seal is not None:
            entries = [self.seal.sealed(conv_id, m) for m in entries]
        try:
            problems = self.store.append_many(conv_id, entries)
        except (StoreError, OSError) as e:
            cause = write_cause(e)
            self._keep_answer(conv_id, entries)
            failed = SaveFailed(SAVE_FAILED.format(what=what, cause=cause), entries, what,
                                cause)
            return Written(entries, [failed])
        if any(m.role == "assistant" for m in entries):
            try:
                self.store.clear_partial(conv_id)  # the answer is an entry now
            except StoreError:
                pass
        events: list[EngineEvent] = [StoreNotice(t) for t in problems]
        events += [EntryAppended(m) for m in entries]
        if any(m.run_event is not None for m in entries):
            self.sync_run(conv_id)
        return Written(entries, events)

    def sync_run(self, conv_id: str, run: RunState | None = None) -> str | None:
        """Bring the run's cache file up to date with the log; a sentence when the file had
        said something else (it is rewritten)."""
        if self._sync_run_file is None:
            return None
        if run is None and self._run_state is not None:
            run = self._run_state(conv_id)
        return self._sync_run_file(conv_id, run) if run is not None else None

    def write_partial(self, conv_id: str, state: dict[str, object], notes: list[str]) -> None:
        """Flush the text being received to its crash sidecar. Only a safety net: a failure
        (a full disk) is noted once in `notes` and never stops the answer."""
        text = state.get("text")
        if isinstance(text, str):
            state = {**state, "text": redact(text)}
        tags = self._request_tags.get(conv_id)
        if state.get("mode") == "run" and tags is not None:  # recovered, it stays with its step
            state = {**state, **tags}
        try:
            self.store.write_partial(conv_id, state)
        except (OSError, StoreError) as e:
            note = (f"The answer could not be written to disk as it arrived "
                    f"({describe_os_error(e) if isinstance(e, OSError) else e}); it is saved "
                    "when complete.")
            if note not in notes:
                notes.append(note)

    def _keep_answer(self, conv_id: str, entries: list[ConversationMessage]) -> None:
        """Where space allows, an unsaved answer's whole text goes to the crash sidecar: if
        nobody saves it in this session, the next open recovers it in its place."""
        for m in entries:
            if m.role == "assistant":
                try:
                    self.store.write_partial(conv_id, {
                        "text": m.text(), "model": m.model, "mode": m.mode,
                        "continues": m.continues, "run_id": m.run_id, "step_id": m.step_id})
                except (OSError, StoreError):
                    pass
                return


def redact_entry(msg: ConversationMessage, secrets: Iterable[str] = ()) -> ConversationMessage:
    """`msg` with the keys known (`core.redact.known`), `secrets` and key-shaped strings
    replaced by a marker in everything it says (its text, its text parts, its tool calls'
    arguments); itself when nothing changed. A changed entry loses its cached token counts
    (they are counted again)."""
    secrets = list(secrets)
    update: dict[str, object] = {}
    if isinstance(msg.content, str):
        clean = redact(msg.content, secrets)
        if clean != msg.content:
            update["content"] = clean
    elif msg.content:
        parts: list[ContentPart] = [
            TextPart(text=redact(p.text, secrets)) if isinstance(p, TextPart) else p
            for p in msg.content]
        if parts != msg.content:
            update["content"] = parts
    if msg.tool_calls:
        calls = [c if MARK not in (args := redact(c.function.arguments, secrets)) else
                 ToolCall(id=c.id, function=c.function.model_copy(update={"arguments": args}))
                 for c in msg.tool_calls]
        if calls != msg.tool_calls:
            update["tool_calls"] = calls
    if not update:
        return msg
    return msg.model_copy(update={**update, "token_counts": {}})


def write_cause(e: StoreError | OSError) -> str:
    """Why a write failed, in a few plain words ("the disk is full")."""
    if isinstance(e, OSError):
        return describe_os_error(e)
    return e.cause if isinstance(e, StoreWriteError) else str(e)

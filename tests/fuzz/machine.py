"""The stateful fuzzer: a hypothesis state machine that drives the Qt-free core the way the
window does (send in chat, agent and run mode, scripted tool calls, Stop at any await point, a
crash, pin, exclude, compact, fork, edit and resend, regenerate, attachments, the model's
vision, AGENTS.md, import and export) against the real loopback server and a real project
folder, and checks the invariants (tests/fuzz/invariants.py) after every step."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import struct
import sys
import tempfile
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from core.attachments import Attachment, accepts_images, attach_file, taken_apart
from core.context.service import ProjectContext
from core.engine import (
    CompactionFinished,
    EngineEvent,
    EntryAppended,
    NothingToContinue,
    NothingToRetry,
    QuestionAsked,
    TurnFinished,
    TurnOptions,
)
from core.factory import build_engine
from core.interchange import ImportProblem, export_openai, read_import
from core.model import ConversationMessage, Mode, annotation
from core.redact import environment_secrets, find_secret
from core.request_copies import finish_writes
from core.runs.driver import NUDGE, RunControlError, RunDriver
from core.settings import LLMSettings
from core.store.branches import asked_at
from core.store.project import Project
from core.tools.runner import ALLOW_CONVERSATION, ALLOW_ONCE, DENY
from core.workflows.workflow import Workflow
from tests.conftest import _head_and_tail
from tests.fuzz.invariants import (
    false_claims,
    has_image,
    log_problems,
    plain,
    ran_calls,
    request_problems,
)
from tests.fuzz.known_bugs import violated
from tests.helpers.fake_llm import (
    MODEL,
    Answer,
    Cut,
    FakeLLMServer,
    HttpError,
    Reply,
    ToolCalls,
    summary_text,
)

# The fake key the environment holds (tests/fuzz/test_fuzz.py sets it): key-shaped, so both the
# app's redaction and the check below know it.
KEY = "sk-proj-FuzzKey7Q2xW9mZ4tR8vB1nC6"
AGENTS_LINE = f"Use the key {KEY} for the staging server."  # AGENTS.md "with key"
IMPORTED = f"the key is {KEY}"  # the message a foreign export adds
DEADLINE = 60.0  # seconds a turn may take before the fuzzer calls it hung
STEPS = [0]  # rules run in this process (the long run reports it)
NUDGE_HEAD = NUDGE[:NUDGE.index("{")]  # how a run's nudge starts

# --- what the scripted model does -----------------------------------------------------------

TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "README.md"}),
    ("read_file", {"path": ".env"}),
    ("read_file", {"path": "missing.txt"}),
    ("list_dir", {"path": "."}),
    ("write_file", {"path": "out.txt", "content": "written by the model\n"}),
    ("edit_file", {"path": "README.md", "old": "Adds", "new": "Sums"}),
    ("run_shell", {"command": "echo hi"}),
    ("run_shell", {"command": "cat .env"}),
    ("run_shell", {"command": "sleep 0.2; echo slept"}),
    ("mcp__echo", {"text": "hi"}),  # the project's MCP server, when it has one
    ("mcp__env_token", {}),  # says the key the server was started with
]
FINAL: list[Reply] = [
    Answer("Done."),
    Answer("Here is a longer answer, streamed in several pieces to stop in between."),
    Answer(""),  # models do answer nothing at all
    Answer("Cut by the output limit", finish_reason="length"),
    Cut("Partial ans", transport=True),
    Cut("Partial ans", transport=False),
    HttpError(500, "boom"),
    HttpError(400, "bad request", type="invalid_request_error"),
]
calls_st = st.lists(st.sampled_from(range(len(TOOL_CALLS))), min_size=1, max_size=3)
script_st = st.tuples(st.lists(st.tuples(calls_st, st.booleans()), max_size=2),
                      st.sampled_from(range(len(FINAL))))
stop_st = st.one_of(st.none(), st.integers(1, 30))
PICK = st.integers(0, 255)  # which conversation or entry: the n-th, modulo how many there are
TEXTS = ["hi", "please read the README", "fix the add function",
         f"my key is {KEY}, keep it safe"]


def png(width: int = 8, height: int = 8) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                                0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


WORKFLOW = Workflow.model_validate({
    "name": "Fuzz run", "steps": [
        {"id": "look", "title": "Look around", "brief": "BRIEF-LOOK read README.md"},
        {"id": "write", "title": "Write", "brief": "BRIEF-WRITE write out.txt"},
    ]})


@dataclass
class Turn:
    """What one engine call did, as its caller saw it."""

    events: list[EngineEvent] = field(default_factory=list)
    stop_at: int | None = None  # the event after which Stop was pressed
    stop_taken: bool = False  # the engine received the Stop (its task's cancellation)
    cancelled: bool = False  # the call ended by passing the cancellation on
    first_request: int = 0  # index in server.requests of its first request

    @property
    def finished(self) -> list[TurnFinished | CompactionFinished]:
        """How the turn (or the summary) said it ended."""
        return [e for e in self.events if isinstance(e, TurnFinished | CompactionFinished)]

    def appended(self, upto: int | None = None) -> list[ConversationMessage]:
        return [e.message for e in self.events[:upto] if isinstance(e, EntryAppended)]


class Workbench(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="wb-fuzz-"))
        self.root = self.tmp / "project"
        self.root.mkdir()
        (self.root / "README.md").write_text("# Calc\nAdds numbers.\n")
        (self.root / "notes.md").write_text("Notes: add() must add.\n")
        (self.root / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
        (self.root / "shot.png").write_bytes(png())
        self.server = FakeLLMServer().start()
        self.loop = asyncio.new_event_loop()
        self.images = True  # the model in use reads images
        self.convs: list[str] = []
        self.scanned: dict[Path, tuple[int, int]] = {}  # files found without a key, as they were
        self.source: dict[str, str] = {}  # a branch or an import -> the conversation it came from
        # an import -> the calls that had run when it was exported: a file carries no link
        # back, so what runs in the exported conversation afterwards is none of its history
        self.exported_ran: dict[str, set[str]] = {}
        self.produced: dict[str, int] = {}  # an answer's entry id -> the request that produced it
        self.request_images: list[bool] = []  # per request: the model in use read images
        self.request_conv: list[str] = []  # per request: the conversation it was for
        self.checked = 0  # requests the invariants have seen
        self.next_call = 0
        self.project = Project.open(self.root)
        self.engine = build_engine(self.project)
        self.snapshot: Path | None = None

    # --- plumbing -------------------------------------------------------------------------------

    def settings(self) -> LLMSettings:
        return LLMSettings(model=MODEL, api_base=self.server.url, auto_retries=0,
                           max_output_tokens=256, images=self.images, request_timeout=20)

    def messages(self, conv: str) -> list[ConversationMessage]:
        return self.project.conversations.load(conv).messages

    def script(self, script: tuple[list[tuple[list[int], bool]], int]) -> None:
        rounds, final = script
        for calls, said in rounds:
            made = []
            for k in calls:
                name, args = TOOL_CALLS[k]
                self.next_call += 1
                made.append((f"call_{self.next_call}", name, json.dumps(args)))
            self.server.script(ToolCalls(made, text="Let me look." if said else ""))
        self.server.script(FINAL[final])

    def drive(self, make: Callable[[], AsyncIterator[EngineEvent]], conv: str,
              stop_at: int | None = None, crash_at: int | None = None,
              choice: str = ALLOW_ONCE, pin_at: int | None = None) -> Turn:
        """Run one engine call to its end; press Stop after event `stop_at` (the engine gets it
        at its next await), copy the project folder as a crash leaves it after `crash_at`."""
        turn = Turn(stop_at=stop_at, first_request=len(self.server.requests))
        answered = [turn.first_request]  # the requests before this one have their answer

        async def consume() -> None:
            gen = make()
            assert isinstance(gen, AsyncGenerator)  # the engine's turns are; closed below
            try:
                async for ev in gen:
                    turn.events.append(ev)
                    n = len(turn.events)
                    if isinstance(ev, EntryAppended) and ev.message.role == "assistant":
                        self.pair(ev.message, answered)
                    if isinstance(ev, QuestionAsked) and n != stop_at:
                        ev.question.answer(choice, "not now" if choice == DENY else "")
                    if n == pin_at:  # the user pins their first message while it runs
                        self.pin_first(conv)
                    if n == crash_at:
                        self.take_snapshot()
                    if n == stop_at:
                        task = asyncio.current_task()
                        assert task is not None
                        task.cancel()
                if stop_at is not None and len(turn.events) >= stop_at:
                    await asyncio.sleep(0)  # a Stop not taken in by the engine lands here
                    turn.stop_taken = True
            finally:
                await gen.aclose()

        async def main() -> None:
            task = asyncio.ensure_future(consume())
            done, _ = await asyncio.wait({task}, timeout=DEADLINE)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=10)
                raise AssertionError(f"the turn hung past {DEADLINE} s: {turn.events[-5:]}")
            if task.cancelled():
                turn.cancelled = True
                # the engine passed the Stop on, unless it had already finished
                turn.stop_taken = not turn.finished
            elif task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

        try:
            self.loop.run_until_complete(main())
        finally:
            new = len(self.server.requests) - len(self.request_images)
            self.request_images += [self.images] * new
            self.request_conv += [conv] * new
            self.server._replies.clear()  # what the model was scripted to say and did not
        self.check_stop(turn)
        return turn

    def pair(self, answer: ConversationMessage, answered: list[int]) -> None:
        """Note the request `answer` answers: the last one in by now (one per round), when it
        came in after the turn's previous answer. An answer stopped before its request left
        (a Stop before the first request, or between a batch's results and the next one)
        answers none: the previous round's request, or an earlier turn's, is not its own."""
        last = len(self.server.requests) - 1
        if last >= answered[0]:
            self.produced.setdefault(answer.id, last)
            answered[0] = last + 1

    def check_stop(self, turn: Turn) -> None:
        """A Stop the engine received ends the turn as stopped, never "ok"."""
        if not turn.stop_taken or turn.cancelled:
            return
        finished = turn.finished
        if not finished:
            raise AssertionError(f"a stopped turn ended without saying how: {turn.events}")
        if finished[-1].status != "stopped":
            assert turn.stop_at is not None
            # N9: the Stop came after an answer's entry, while its request copies settled (the
            # exchange then says how that entry ended: "ok", or "error" for a failed answer,
            # and a run goes on to its next request)
            at = turn.stop_at
            late = isinstance(turn.events[at - 1], EntryAppended) and at < len(turn.events) \
                and isinstance(turn.events[at], TurnFinished | CompactionFinished)
            violated("N9" if late else None,
                     f"Stop pressed after event {turn.stop_at} "
                     f"({type(turn.events[turn.stop_at - 1]).__name__}) was taken in, and the "
                     f"turn ended {finished[-1].status!r}; events: "
                     f"{[type(e).__name__ for e in turn.events]}")

    def pin_first(self, conv: str) -> None:
        first = next((m for m in self.messages(conv) if m.kind != "annotation"), None)
        if first is not None:
            assert self.engine.writer.write(conv, [annotation(first.id, "pin")], "the pin").ok

    def take_snapshot(self) -> None:
        """The project folder as a process killed right now leaves it."""
        finish_writes(10)
        self.snapshot = self.tmp / "crashed"
        shutil.rmtree(self.snapshot, ignore_errors=True)
        shutil.copytree(self.root, self.snapshot, symlinks=True)

    def close_project(self) -> None:
        self.loop.run_until_complete(self.engine.close())
        finish_writes(30)
        self.project.close()

    def reopen(self) -> None:
        self.project = Project.open(self.root)
        assert not self.project.read_only, self.project.read_only_reason
        self.engine = build_engine(self.project)

    def ancestry_ran(self, conv: str) -> set[str]:
        """The calls with a real result in `conv`'s ancestors (what it was forked or imported
        from, and theirs)."""
        if conv in self.exported_ran:
            return set(self.exported_ran[conv])
        ran: set[str] = set()
        seen = set()
        at = self.source.get(conv)
        while at is not None and at not in seen:
            seen.add(at)
            ran |= ran_calls(self.messages(at))
            if at in self.exported_ran:  # an import: its history ends at the export
                return ran | self.exported_ran[at]
            at = self.source.get(at)
        return ran

    def first_user_request(self, turn: Turn) -> dict[str, Any] | None:
        if turn.first_request < len(self.server.requests):
            return self.server.requests[turn.first_request].body
        return None

    def attachments(self, which: list[str]) -> list[Attachment]:
        store = self.engine.context.attachments
        assert store is not None
        counter = self.engine.context.counter(MODEL)
        return [attach_file(self.root / name, store, counter, self.root) for name in which]

    def send_options(self, mode: Mode, approve: str) -> TurnOptions:
        return TurnOptions(mode=mode, approve=approve)  # type: ignore[arg-type]

    @staticmethod
    def pick(items: list[Any], n: int) -> Any:
        return items[n % len(items)]

    # --- rules ----------------------------------------------------------------------------------

    @initialize(mcp=st.sampled_from([False, False, False, True]))
    def first_conversation(self, mcp: bool = False) -> None:
        """The first conversation; the project may have an MCP server (tests/helpers/
        mcp_server.py over stdio, the key in its environment), started by the first agent
        turn."""
        if mcp:
            server = {"command": sys.executable, "args": ["-m", "tests.helpers.mcp_server"],
                      "cwd": str(Path(__file__).resolve().parents[2]),
                      "env": {"MCP_TOKEN": KEY}}
            (self.root / ".workbench" / "mcp.json").write_text(
                json.dumps({"mcpServers": {"mcp": server}}), encoding="utf-8")
            self.close_project()
            self.reopen()
        self.convs.append(self.project.conversations.create("fuzz").id)

    @rule(which=PICK, network=st.booleans(), mcp_off=st.booleans())
    def toggle_tools(self, which: int, network: bool, mcp_off: bool) -> None:
        """The conversation's switches: commands may use the network; the MCP server's
        tools off."""
        conv = self.pick(self.convs, which)
        self.project.conversations.update_meta(conv, allow_network=network,
                                               tools_off=["mcp__*"] if mcp_off else [])

    @rule()
    def new_conversation(self) -> None:
        self.convs.append(self.project.conversations.create().id)

    @rule(which=PICK, mode=st.sampled_from(["chat", "agent"]), text=st.sampled_from(TEXTS),
          attach=st.lists(st.sampled_from(["notes.md", "shot.png"]), unique=True, max_size=2),
          script=script_st, stop_at=stop_st,
          approve=st.sampled_from(["always", "never", "ask"]),
          choice=st.sampled_from([ALLOW_ONCE, ALLOW_CONVERSATION, DENY]),
          via_preview=st.booleans(), pin_at=stop_st)
    def send(self, which: int, mode: Mode, text: str, attach: list[str],
             script: tuple[list[tuple[list[int], bool]], int], stop_at: int | None,
             approve: str, choice: str, via_preview: bool, pin_at: int | None = None) -> None:
        conv = self.pick(self.convs, which)
        if not self.images:  # as the window and the CLI refuse a new image for such a model
            attach = [a for a in attach if a != "shot.png"]
        attachments = self.attachments(attach)
        self.script(script)
        settings, options = self.settings(), self.send_options(mode, approve)
        if via_preview and stop_at is None:
            self.send_with_preview(conv, text, attachments, settings, options, choice)
            return
        self.drive(lambda: self.engine.send(conv, text, settings, options, attachments), conv,
                   stop_at, choice=choice, pin_at=pin_at)

    def send_with_preview(self, conv: str, text: str, attachments: list[Attachment],
                          settings: LLMSettings, options: TurnOptions, choice: str) -> None:
        """Send as `Engine.send` does (the calls a crash left answered, the message appended,
        the turn run), checking in between that what the context service previews for the
        next request, and what `workbench context` (a context of its own) says, is what the
        server then receives."""
        for _ in self.engine.close_interrupted(conv):
            pass
        from core.attachments import user_message
        user = self.engine.context.counter(MODEL).with_count(
            user_message(text, attachments, mode=options.mode))
        assert self.engine.writer.write(conv, [user], "your message").ok
        self.proceed_with_preview(conv, settings, options, choice)

    def proceed_with_preview(self, conv: str, settings: LLMSettings, options: TurnOptions,
                             choice: str = ALLOW_ONCE, instruction: str | None = None) -> Turn:
        """`Engine.proceed` (with a run's one-off `instruction`, which no preview holds: the
        exchange adds it as the last message). As it does, the calls a crash (or an import)
        left without results are answered first: the preview is of the log it then builds
        from."""
        for _ in self.engine.close_interrupted(conv):
            pass
        preview = self.engine.context.preview(conv, settings, options.mode)
        cli = ProjectContext.for_project(self.project).preview(conv, settings, options.mode)
        turn = self.drive(lambda: self.engine.proceed(conv, settings, options, instruction),
                          conv, choice=choice)
        sent = self.first_user_request(turn)
        if sent is None:
            return turn
        attachments = self.engine.context.attachments
        assert attachments is not None
        # put on the wire as the exchange does: references made images, or, for a model that
        # takes none, each image a one-line note (N10's fix)
        images = accepts_images(settings.model, settings.images)
        told = [{"role": "user", "content": instruction}] if instruction else []
        for name, built in (("the preview", preview), ("`workbench context`", cli)):
            said = plain(attachments.inline(built.messages, images)) + told
            assert said == plain(sent["messages"]), (
                f"{name} differs from the request sent:\n{json.dumps(said)[:2000]}\n"
                f"{json.dumps(sent['messages'])[:2000]}")
            if (built.tools or None) == (sent.get("tools") or None):
                continue
            said_names = [t["function"]["name"] for t in built.tools or []]
            sent_names = [t["function"]["name"] for t in sent.get("tools") or []]
            # F3: only the MCP server's tools are missing (it had never been started)
            mcp_only = [n for n in sent_names if n not in said_names] and \
                all("__" in n for n in sent_names if n not in said_names) and \
                set(said_names) <= set(sent_names)
            violated("F3" if mcp_only else None,
                     f"{name}: tools differ: {said_names} said, {sent_names} sent")
        return turn

    @rule(which=PICK, mode=st.sampled_from(["chat", "agent"]), script=script_st,
          crash_at=st.integers(1, 30))
    def crash(self, which: int, mode: Mode, script: tuple[list[tuple[list[int], bool]],
                                                                   int], crash_at: int) -> None:
        """The app is killed during a turn (after event `crash_at`), and the project opened
        again from what it left on disk."""
        conv = self.pick(self.convs, which)
        before = [m.id for m in self.messages(conv)]
        self.script(script)
        settings, options = self.settings(), self.send_options(mode, "always")
        self.snapshot = None
        turn = self.drive(lambda: self.engine.send(conv, "go on", settings, options), conv,
                          stop_at=crash_at, crash_at=crash_at)
        if self.snapshot is None:
            return  # the turn ended before the crash
        acknowledged = before + [m.id for m in turn.appended(crash_at)]
        self.close_project()
        shutil.rmtree(self.root)
        self.snapshot.rename(self.root)
        self.snapshot = None
        self.reopen()
        after = [m.id for m in self.messages(conv)]
        it = iter(after)
        lost = [i for i in acknowledged if i not in it]  # in order: a subsequence of the log
        assert not lost, f"entries acknowledged before the crash are lost or out of order: {lost}"

    @rule(which=PICK, entry=PICK, action=st.sampled_from(["pin", "unpin", "exclude", "include"]))
    def annotate(self, which: int, entry: int, action: str) -> None:
        conv = self.pick(self.convs, which)
        entries = [m for m in self.messages(conv) if m.kind != "annotation"]
        if not entries:
            return
        target = self.pick(entries, entry)
        assert self.engine.writer.write(conv, [annotation(target.id, action)], "the pin").ok

    @rule(which=PICK, ok=st.booleans(), stop_at=stop_st)
    def compact(self, which: int, ok: bool, stop_at: int | None) -> None:
        conv = self.pick(self.convs, which)
        if ok:
            self.server.script(*[Answer(summary_text(f"SUMMARY {n}")) for n in range(3)])
        else:
            self.server.script(HttpError(500, "no summary today"))
        settings = self.settings()
        self.drive(lambda: self.engine.summarize(conv, settings), conv, stop_at)

    @rule(which=PICK, entry=PICK, before=st.booleans())
    def fork(self, which: int, entry: int, before: bool) -> None:
        conv = self.pick(self.convs, which)
        entries = [m for m in self.messages(conv) if m.kind != "annotation"]
        at = self.pick([None, *entries], entry)
        meta = self.project.conversations.fork(conv, at.id if at is not None else None,
                                               before=before)
        self.convs.append(meta.id)
        self.source[meta.id] = conv

    @rule(which=PICK, message=PICK, script=script_st)
    def edit_and_resend(self, which: int, message: int,
                        script: tuple[list[tuple[list[int], bool]], int]) -> None:
        """As the window does it (app/window/branch_flow.py): a branch just before one of the user's
        messages, and the message's text sent there, unchanged."""
        conv = self.pick(self.convs, which)
        users = [m for m in self.messages(conv) if m.role == "user" and m.kind == "message"
                 and m.run_event is None]
        if not users:
            return
        entry = self.pick(users, message)
        meta = self.project.conversations.fork(conv, entry.id, before=True)
        self.convs.append(meta.id)
        self.source[meta.id] = conv
        self.script(script)
        settings, options = self.settings(), self.send_options(entry.mode or "chat", "always")
        # the box gets the typed text and the message's attachments as chips (core.attachments)
        text, attached = taken_apart(entry, self.engine.context.counter(settings.model))
        turn = self.drive(lambda: self.engine.send(meta.id, text, settings, options, attached),
                          meta.id)
        resent = next((m for m in turn.appended() if m.role == "user"), None)
        if resent is not None and resent.content != entry.content and KEY not in str(entry.content):
            # (a key an import kept, N8, is rightly redacted when the message is sent again)
            violated("N3" if isinstance(entry.content, list) else None,
                     f"edit and resend of {entry.content!r} sent {resent.content!r}")

    @rule(which=PICK, entry=PICK, mode=st.sampled_from([None, "chat", "agent"]), script=script_st)
    def regenerate(self, which: int, entry: int, mode: Mode | None,
                   script: tuple[list[tuple[list[int], bool]], int]) -> None:
        """As the window does it (app/window/branch_flow.py): a branch at the entry the
        answer's request ended in, and the request made again there (in `mode`, when chosen;
        in run mode with the run's nudge, when it waits for one)."""
        conv = self.pick(self.convs, which)
        messages = self.messages(conv)
        answers = [i for i, m in enumerate(messages) if m.role in ("assistant", "tool")
                   and m.kind in ("message", "error")]
        if not answers:
            return
        at = self.pick(answers, entry)
        asked = asked_at(messages, messages[at].id)  # where the window branches
        if asked is None:
            return
        meta = self.project.conversations.fork(conv, asked.id)
        self.convs.append(meta.id)
        self.source[meta.id] = conv
        self.script(script)
        options = self.send_options(mode or messages[at].mode or "chat", "always")
        nudge = RunDriver(self.engine).nudge(meta.id) if options.mode == "run" else None
        turn = self.proceed_with_preview(meta.id, self.settings(), options, instruction=nudge)
        original = self.produced.get(messages[at].id)
        sent = self.first_user_request(turn)
        if original is None or sent is None or self.decided_since(messages, at, asked.id):
            return
        def tail(body: dict[str, Any]) -> list[tuple[str, Any]]:
            msgs = body["messages"]
            # after the user's last message (a run's nudge is not one: what it follows counts)
            last_user = max((i for i, m in enumerate(msgs) if m["role"] == "user"
                             and not str(m.get("content")).startswith(NUDGE_HEAD)), default=0)
            return [(m["role"], m.get("tool_call_id")) for m in msgs[last_user + 1:]]
        before = tail(self.server.requests[original].body)
        if nudge is None and before[-1:] == [("user", None)]:
            before = before[:-1]  # the run's nudge, asked again only in run mode
        if before != tail(sent):
            violated("regen-drops-tools" if before and not tail(sent) else None,
                     f"the regenerated request ends {tail(sent)}, the original's {before}")

    @staticmethod
    def decided_since(messages: list[ConversationMessage], at: int, upto: str) -> bool:
        """The user excluded or included an entry of the history up to `upto`, or compacted,
        after the answer `at`: the branch keeps those decisions (README: Branches), so its
        request is what they make it, not the original's (exclude a misleading result, then
        regenerate: the point of it)."""
        shared = {m.id for m in messages[:next(i for i, m in enumerate(messages)
                                                if m.id == upto) + 1]}
        return any(m.kind == "summary" or m.kind == "annotation" and m.target in shared
                   and m.content in ("exclude", "include") for m in messages[at + 1:])

    @rule(which=PICK, script=script_st, stop_at=stop_st)
    def continue_or_retry(self, which: int,
                          script: tuple[list[tuple[list[int], bool]], int],
                          stop_at: int | None) -> None:
        conv = self.pick(self.convs, which)
        self.script(script)
        settings, options = self.settings(), self.send_options("agent", "always")
        try:
            self.engine.check_retry(conv)
        except NothingToRetry:
            try:
                self.drive(lambda: self.engine.continue_(conv, settings, options), conv,
                           stop_at)
            except NothingToContinue:
                pass
            return
        self.drive(lambda: self.engine.retry(conv, settings, options), conv, stop_at)

    @rule(which=PICK, steps=st.lists(st.sampled_from(["done", "tool", "talk"]),
                                         max_size=4), stop_at=stop_st)
    def run_workflow(self, which: int, steps: list[str], stop_at: int | None) -> None:
        conv = self.pick(self.convs, which)
        for n, what in enumerate(steps):
            if what == "done":
                self.server.script(ToolCalls([(f"done_{self.next_call}_{n}", "complete_step",
                                               json.dumps({"result": "done"}))]))
            elif what == "tool":
                self.script(([([0, 4], False)], 0))
            else:
                self.server.script(Answer("Working on it."))
        driver = RunDriver(self.engine)
        settings = self.settings()
        options = TurnOptions(mode="run", approve="always")
        try:
            self.drive(lambda: driver.start(conv, WORKFLOW, settings, options), conv, stop_at)
        except RunControlError:
            pass

    @rule()
    def switch_model(self) -> None:
        """Another model: one that reads images, or one that does not."""
        self.images = not self.images

    @rule(which=PICK, what=st.sampled_from(["plain", "with key", "none", "off", "on"]))
    def agents_md(self, which: int, what: str) -> None:
        path = self.root / "AGENTS.md"
        if what == "plain":
            path.write_text("Always answer in English.\n")
        elif what == "with key":
            path.write_text(AGENTS_LINE + "\n")
        elif what == "none":
            path.unlink(missing_ok=True)
        else:
            conv = self.pick(self.convs, which)
            self.project.conversations.update_meta(conv, project_instructions=what == "on")

    @rule(which=PICK, key=st.booleans())
    def export_import(self, which: int, key: bool) -> None:
        """Export as OpenAI JSON, import it back: the same messages (with a key added to the
        file, as a foreign export might hold one, the import must not keep it)."""
        conv = self.pick(self.convs, which)
        store = self.engine.context.attachments
        assert store is not None
        exported = json.loads(export_openai(self.messages(conv), "fuzz", inline=store.inline))
        if key:
            exported["messages"].append({"role": "user", "content": IMPORTED})
        path = self.tmp / "export.json"
        path.write_text(json.dumps(exported))
        try:
            title, messages = read_import(path)
        except ImportProblem:
            assert not exported["messages"], "an export of ours cannot be imported back"
            return
        counter = self.engine.context.counter(MODEL)
        meta = self.project.conversations.import_conversation(
            title, [counter.with_count(store.extern(m)) for m in messages])
        self.convs.append(meta.id)
        self.source[meta.id] = conv
        self.exported_ran[meta.id] = ran_calls(self.messages(conv)) | self.ancestry_ran(conv)
        if key:
            return
        again = json.loads(export_openai(self.messages(meta.id), "fuzz", inline=store.inline))
        assert again["messages"] == exported["messages"], "export → import → export changed"

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def logs_are_complete(self) -> None:
        STEPS[0] += 1
        for conv in self.convs:
            for problem in log_problems(self.messages(conv)):
                violated(None, f"conversation {conv}: {problem}")

    @invariant()
    def requests_are_valid_and_true(self) -> None:
        requests = self.server.requests
        for n in range(self.checked, len(requests)):
            body, conv = requests[n].body, self.request_conv[n]
            if "messages" not in body:
                continue
            excluded = any(m.role == "user" and not m.include_in_context
                           for m in self.messages(conv))
            for problem in request_problems(body):
                bug = None
                if excluded and problem.startswith("the first message after the system"):
                    bug = "F1"
                elif excluded and problem == "no message besides the system prompt":
                    bug = "F2"
                violated(bug, f"request {n} ({conv}): {problem}")
            if not self.request_images[n]:
                images = [i for i, m in enumerate(body["messages"]) if has_image(m)]
                if images:
                    violated("N10", f"request {n} sends images (messages {images}) to a "
                                    "model without vision")
            lies = false_claims(body, self.ancestry_ran(conv))
            if lies:
                violated("N2" if conv in self.source else None, f"request {n}: {lies}")
            self.no_key_in(f"request {n}", requests[n].raw.decode("utf-8", "replace") or
                           json.dumps(body))
        self.checked = len(requests)

    @invariant()
    def no_key_in_files(self) -> None:
        finish_writes(10)  # the request copies of the last step, written
        folders = [self.root / ".workbench"] + [
            Path(os.environ[v]) for v in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                              "XDG_CACHE_HOME")
            if v in os.environ]
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(p for p in folder.rglob("*") if p.is_file()
                               and p.name != "mcp.json"  # the user's own, with its env
                               and "tokenizers" not in p.parts):  # tiktoken's, decoded
                try:
                    info = path.stat()
                    seen = (info.st_size, info.st_mtime_ns)
                    if self.scanned.get(path) == seen:  # checked as it is at an earlier step
                        continue
                    text = _head_and_tail(path)
                except FileNotFoundError:  # a copy's temporary file, renamed meanwhile
                    continue
                self.no_key_in(str(path.relative_to(folder.parent)), text)
                self.scanned[path] = seen

    def no_key_in(self, where: str, text: str) -> None:
        secrets = environment_secrets(os.environ)
        found = find_secret(text, secrets)
        if found is None:
            return
        # Excused only where the key sits in the sentence the known bug carries it in.
        bugs = [bug for bug, line in (("N8-agents-md", AGENTS_LINE), ("N8-import", IMPORTED))
                if line in text]
        rest = text
        for line in (AGENTS_LINE, IMPORTED):
            rest = rest.replace(line, "")
        if bugs and find_secret(rest, secrets) is None:
            for bug in bugs:
                violated(bug, f"a key reached {where}")
            return
        violated(None, f"a key reached {where}: {found[:12]}…")

    def teardown(self) -> None:
        try:
            self.close_project()
        finally:
            self.server.stop()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


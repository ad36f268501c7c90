"""Branches: a fork copies the history up to an entry (and what the user decided about it), the
original is never written, the fork's first request is the original's byte for byte, and a fork
killed half-way leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, annotation
from core.store.branches import NoSuchEntry
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.helpers.trajectories import make_agent_session

ROOT = Path(__file__).resolve().parents[2]
COUNTER = TokenCounter("o200k_base")


def log_of(project: Path, conv: str) -> Path:
    return project / ".workbench" / "conversations" / conv / "messages.jsonl"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def session(project: Path) -> tuple[str, list[ConversationMessage]]:
    with Project.open(project) as p:
        conv = p.conversations.create("work").id
        msgs = [COUNTER.with_count(m) for m in make_agent_session(6, seed=4)]
        p.conversations.append_many(conv, msgs)
        return conv, msgs


def test_the_forks_first_request_is_the_originals_byte_for_byte(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("Paris."), Answer("About 2.1 million."), Answer("About 2.2 million."))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "Capital of France?")
    assert code == 0, err
    conv = err.split()[1]
    code, _, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                       llm_server.url, "How many people live there?")
    assert code == 0, err
    original = digest(log_of(project_dir, conv))
    with Project.open(project_dir, read_only=True) as p:
        answer = [m for m in p.conversations.load(conv).messages if m.role == "assistant"][0]
    code, out, err = cli(capsys, "fork", project_dir, "-c", conv, answer.id[:-4])
    assert code == 0, err
    fork = out.strip()
    assert "forked at entry" in err and "2 entries" in err
    code, _, err = cli(capsys, "send", project_dir, "-c", fork, "--model", MODEL, "--api-base",
                       llm_server.url, "And its metro area?")
    assert code == 0, err
    parent_raw, fork_raw = llm_server.requests[1].raw, llm_server.requests[2].raw
    common = parent_raw[:parent_raw.index(b'{"role":"user","content":"How many')]
    assert fork_raw.startswith(common)
    assert fork_raw[len(common):].startswith(b'{"role":"user","content":"And its metro area?"')
    assert digest(log_of(project_dir, conv)) == original  # the original is untouched
    with Project.open(project_dir, read_only=True) as p:
        rows = {r.id: r for r in p.conversations.list()}
        texts = [m.text() for m in p.conversations.load(fork).messages]
    assert texts == ["Capital of France?", "Paris.", "And its metro area?", "About 2.2 million."]
    assert rows[fork].branch_of == conv and rows[fork].branch_at == answer.id
    assert rows[fork].title == rows[conv].title + " (branch 1)"
    code, out, _ = cli(capsys, "list", project_dir)
    assert f"a branch of {conv}" in out


def test_a_fork_keeps_calls_with_their_results_and_the_users_later_decisions(
        project_dir: Path) -> None:
    conv, msgs = session(project_dir)
    call = next(m for m in msgs if m.tool_calls)
    results = [m for m in msgs if m.tool_call_id in {c.id for c in call.tool_calls or ()}]
    cut_at = msgs.index(results[-1])
    later = msgs[cut_at + 2]
    first_user = msgs[0]
    with Project.open(project_dir) as p:
        store = p.conversations
        store.append_many(conv, [annotation(first_user.id, "pin"),
                                 annotation(call.id, "exclude"),
                                 annotation(later.id, "pin")])
        before = digest(log_of(project_dir, conv))
        meta = store.fork(conv, call.id, "tried another way")
        got = store.load(meta.id).messages
    shown = [m for m in got if m.kind != "annotation"]
    assert [m.id for m in shown] == [m.id for m in msgs[:cut_at + 1]]  # the results came along
    assert shown[0].pinned and not next(m for m in shown if m.id == call.id).include_in_context
    assert later.id not in {m.target for m in got}  # a decision about a later entry stays behind
    assert meta.title == "tried another way" and meta.branch_at == results[-1].id
    assert digest(log_of(project_dir, conv)) == before


def test_before_an_entry_and_a_fork_of_a_fork_group_with_the_original(project_dir: Path) -> None:
    conv, msgs = session(project_dir)
    users = [m for m in msgs if m.role == "user"]
    with Project.open(project_dir) as p:
        store = p.conversations
        edit = store.fork(conv, users[1].id, before=True)
        kept = [m.id for m in store.load(edit.id).messages]
        assert kept == [m.id for m in msgs[:msgs.index(users[1])]]
        # A fork of the branch inside the part it copied is a version of the original there ...
        inner = store.fork(edit.id, users[0].id)
        assert (inner.branch_of, inner.branch_at) == (conv, users[0].id)
        assert (edit.title, inner.title) == ("work (branch 1)", "work (branch 2)")
        # ... and past it, a version of the branch.
        store.append(edit.id, ConversationMessage(role="user", content="in other words"))
        store.append(edit.id, ConversationMessage(role="assistant", content="I see"))
        tail = store.load(edit.id).messages[-1]
        outer = store.fork(edit.id, tail.id)
        assert (outer.branch_of, outer.branch_at) == (edit.id, tail.id)
        # Deleting a branch leaves its origin and its siblings alone.
        store.delete(edit.id)
        assert {r.id for r in store.list()} == {conv, inner.id, outer.id}
        assert [m.id for m in store.load(conv).messages] == [m.id for m in msgs]
        with pytest.raises(NoSuchEntry):
            store.fork(conv, "0" * 32)
        assert len(store.list()) == 3


def test_a_fork_of_ten_thousand_messages_is_a_file_copy(project_dir: Path) -> None:
    msgs = [ConversationMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i} " * 50)
            for i in range(10_000)]
    with Project.open(project_dir) as p:
        conv = p.conversations.create("long").id
        p.conversations.append_many(conv, msgs)
        meta = p.conversations.fork(conv, msgs[-1].id)
    a, b = log_of(project_dir, conv).read_bytes(), log_of(project_dir, meta.id).read_bytes()
    assert a == b  # the whole history, as written


def test_a_fork_killed_half_way_leaves_nothing(project_dir: Path, tmp_path: Path) -> None:
    conv, msgs = session(project_dir)
    started = tmp_path / "started"
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        import core.store.branches as branches
        from core.store.project import Project

        real = branches.copy_prefix
        def slow(src, dst, end, extra):
            real(src, dst, end // 2, b"")
            Path({str(started)!r}).touch()
            time.sleep(60)
        branches.copy_prefix = slow
        with Project.open(Path({str(project_dir)!r})) as p:
            p.conversations.fork({conv!r}, {msgs[-1].id!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Project.open(project_dir) as p:
        assert [r.id for r in p.conversations.list()] == [conv]
    leftovers = [e.name for e in (project_dir / ".workbench" / "conversations").iterdir()
                 if e.is_dir() and e.name != conv]
    assert leftovers == []


def test_summaries_of_the_prefix_and_the_kept_compaction_come_along(project_dir: Path) -> None:
    conv, msgs = session(project_dir)
    cut = 6
    inside = ConversationMessage(role="system", kind="summary", content="Earlier: set up.",
                                 covers=[m.id for m in msgs[:4]])
    across = ConversationMessage(role="system", kind="summary", content="Everything so far.",
                                 covers=[m.id for m in msgs])
    with Project.open(project_dir) as p:
        store = p.conversations
        store.append_many(conv, [inside, across])
        store.write_view(conv, {"version": 1, "kept": "as it was"})
        meta = store.fork(conv, msgs[cut].id)
        got = store.load(meta.id).messages
        assert store.read_view(meta.id) == {"version": 1, "kept": "as it was"}
    summaries = [m.id for m in got if m.kind == "summary"]
    assert summaries == [inside.id]  # the one covering entries past the fork point stays

"""The file tools under attack from the project folder itself (a cloned repository can carry
anything): planted links never redirect a write, and a FIFO or a device never blocks a tool.
Real files in a temporary project, the real tool runner, every wait with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, FunctionCall, ToolCall
from core.tools import tools_for
from core.tools.runner import ToolResult, ToolRunner
from core.tools.sandbox import Sandbox
from core.tools.shell import tool_environment

DEADLINE_S = 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".workbench" / "conversations" / "c1").mkdir(parents=True)
    (root / ".workbench" / "conversations" / "c1" / "messages.jsonl").write_text("{}\n")
    (root / "README.md").write_text("# Project\nold line\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_text("do not touch\n")
    target.chmod(0o600)
    return target


def run(root: Path, *calls: tuple[str, dict[str, object]], policy: str = "always",
        conv: str = "conv", ids: list[str] | None = None,
        history: list[ConversationMessage] | None = None) -> list[ConversationMessage]:
    runner = ToolRunner(root, root / ".workbench", tools_for("agent"),
                        TokenCounter.for_model(None), policy,  # type: ignore[arg-type]
                        Sandbox("none", why="test"), env=tool_environment())
    tool_calls = [ToolCall(id=ids[i] if ids else f"c{i}",
                           function=FunctionCall(name=n, arguments=json.dumps(a)))
                  for i, (n, a) in enumerate(calls)]

    async def go() -> list[ConversationMessage]:
        return [e.entry async for e in runner.run(conv, tool_calls, history or [])
                if isinstance(e, ToolResult)]

    async def bounded() -> list[ConversationMessage]:
        return await asyncio.wait_for(go(), DEADLINE_S)

    return asyncio.run(bounded())


def test_a_planted_temp_file_link_cannot_redirect_a_write_or_an_edit(
        root: Path, outside: Path) -> None:
    log = root / ".workbench" / "conversations" / "c1" / "messages.jsonl"
    (root / ".README.md.workbench-tmp").symlink_to(outside)
    (root / ".NEW.md.workbench-tmp").symlink_to(log)
    written, edited, created = run(
        root, ("write_file", {"path": "README.md", "content": "# Project\nnew line\n"}),
        ("edit_file", {"path": "README.md", "old": "new line", "new": "edited line"}),
        ("write_file", {"path": "NEW.md", "content": "fresh\n"}))
    assert [e.status for e in (written, edited, created)] == ["ok", "ok", "ok"]
    assert (root / "README.md").read_text() == "# Project\nedited line\n"
    assert (root / "NEW.md").read_text() == "fresh\n"
    assert outside.read_text() == "do not touch\n"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600  # not even its mode changed
    assert log.read_text() == "{}\n"
    assert not [p for p in root.iterdir() if p.name.endswith(".workbench-tmp")
                and not p.is_symlink()]  # no temporary file left behind


def test_a_folder_linked_out_of_the_project_is_refused(root: Path, outside: Path) -> None:
    (root / "docs").symlink_to(outside.parent)
    entry, = run(root, ("write_file", {"path": "docs/precious.txt", "content": "x"}))
    assert entry.status == "error" and "outside the project" in entry.text()
    assert outside.read_text() == "do not touch\n"


def test_a_fifo_or_a_device_never_blocks_a_tool(root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "dev").symlink_to("/dev/zero")  # a link inside the project is followed
    reads = run(root, ("read_file", {"path": "pipe"}), ("search_files", {"pattern": "x"}),
                policy="never")  # read-only tools run even where nothing may change
    assert reads[0].status == "error" and "named pipe (FIFO)" in reads[0].text()
    assert reads[1].status == "ok"  # the search goes on past it
    writes = run(root, ("write_file", {"path": "pipe", "content": "x"}),
                 ("edit_file", {"path": "pipe", "old": "a", "new": "b"}),
                 ("search_files", {"pattern": "x", "path": "pipe"}))
    assert [e.status for e in writes[:2]] == ["error", "error"]
    assert all("named pipe (FIFO)" in e.text() for e in writes[:2])
    assert stat.S_ISFIFO(os.stat(root / "pipe").st_mode)  # left as it was


def test_a_planted_fifo_where_the_temporary_file_went_does_not_block_a_write(
        root: Path) -> None:
    os.mkfifo(root / ".notes.md.workbench-tmp")
    entry, = run(root, ("write_file", {"path": "notes.md", "content": "hello\n"}))
    assert entry.status == "ok" and (root / "notes.md").read_text() == "hello\n"


def test_outputs_of_calls_with_the_same_id_never_overwrite_each_other(root: Path) -> None:
    """Providers reuse short call ids, and imported sessions carry theirs."""
    def big(start: int, conv: str) -> ConversationMessage:
        entry, = run(root, ("run_shell", {"command": f"seq {start} {start + 100000}"}),
                     conv=conv, ids=["call_0"])
        assert entry.offload is not None
        return entry

    first, second, other = big(1, "a"), big(500000, "a"), big(900000, "b")
    for entry, start in ((first, 1), (second, 500000), (other, 900000)):
        assert entry.offload is not None
        full = (root / ".workbench" / entry.offload.path).read_text().splitlines()
        assert full[1] == str(start)  # each output is its own, whole
    # the marker in each preview reads back its own output
    for entry, start in ((first, 1), (second, 500000)):
        ref = entry.text().split('read_tool_result("')[1].split('"')[0]
        page, = run(root, ("read_tool_result", {"ref": ref, "limit": 2}), conv="a",
                    history=[first, second])
        assert page.text().splitlines()[1].endswith(f"\t{start}")


def test_an_output_that_cannot_be_kept_on_a_full_disk_leaves_nothing_behind(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from core.tools import results

    class FullDisk:
        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        def replace(self, *_args: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    def full_open(file: object, mode: str = "r", *args: object, **kw: object) -> object:
        if "w" in mode:  # the copy runs out of space half-way
            f = open(file, mode, *args, **kw)  # type: ignore[call-overload]
            f.write(b"half")
            f.flush()

            def no_space(_data: object) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")
            f.write = no_space
            return f
        return open(file, mode, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(results, "os", FullDisk())
    monkeypatch.setattr(results, "open", full_open, raising=False)
    entry, = run(root, ("run_shell", {"command": "seq 1 200000"}))
    assert entry.offload is None and "could not be kept (No space left on device)" in entry.text()
    assert entry.text().startswith("[exit code 0]\n1\n2\n") and "200000" in entry.text()
    left = [p.name for p in (root / ".workbench" / "tool-results").rglob("*") if p.is_file()
            and not p.name.startswith(".started-")]  # (an empty mark, gone once logged)
    assert left == []  # no .running- file, no half output keeping the disk full


def test_a_file_that_is_not_utf8_is_never_silently_rewritten(root: Path) -> None:
    data = b"# notes\n" + b"plain ascii line\n" * 700 + b"caf\xe9 au lait\n"  # Latin-1, past 8 KB
    (root / "notes.txt").write_bytes(data)
    edited, written = run(root, ("edit_file", {"path": "notes.txt", "old": "# notes",
                                               "new": "# Notes"}),
                          ("write_file", {"path": "notes.txt", "content": "all new\n"}))
    assert edited.status == "error" and "not UTF-8 text (byte 0xe9" in edited.text()
    assert written.status == "error" and "nothing was changed" in written.text()
    assert (root / "notes.txt").read_bytes() == data


def test_a_text_file_over_the_read_limit_is_never_cut_by_an_edit(root: Path) -> None:
    from core.tools.files import MAX_READ_BYTES

    row = b"00000001,some,csv,data,that,is,plain,ascii\n"
    data = b"00000000,head\n" + row * (MAX_READ_BYTES // len(row) + 1000)  # 20 MB and more
    (root / "big.csv").write_bytes(data)
    edited, = run(root, ("edit_file", {"path": "big.csv", "old": "00000000,head",
                                       "new": "00000000,HEAD"}))
    assert edited.status == "error" and "over 20 MB" in edited.text()
    assert "nothing was changed" in edited.text()
    assert (root / "big.csv").read_bytes() == data


def test_a_file_changed_while_the_approval_was_open_is_not_overwritten(root: Path) -> None:
    from core.questions import Question
    from core.tools.runner import ALLOW_ONCE

    runner = ToolRunner(root, root / ".workbench", tools_for("agent"),
                        TokenCounter.for_model(None), "ask", Sandbox("none", why="test"),
                        env=tool_environment())
    call = ToolCall(id="e1", function=FunctionCall(name="edit_file", arguments=json.dumps(
        {"path": "README.md", "old": "old line", "new": "model's line"})))

    async def go() -> list[ConversationMessage]:
        entries = []
        async for event in runner.run("conv", [call], []):
            if isinstance(event, Question):  # the user edits the file, then allows
                (root / "README.md").write_text("# Project\nold line\nthe user's own line\n")
                event.answer(ALLOW_ONCE, "")
            elif isinstance(event, ToolResult):
                entries.append(event.entry)
        return entries

    entry, = asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    assert entry.status == "error" and "changed while this change waited" in entry.text()
    assert (root / "README.md").read_text() == "# Project\nold line\nthe user's own line\n"


def test_a_kept_output_made_a_fifo_is_refused_at_once(root: Path) -> None:
    """A log or a folder from elsewhere can name a FIFO among the kept outputs: reading it
    must not block the turn."""
    import threading

    entry, = run(root, ("run_shell", {"command": "seq 1 100000"}))
    assert entry.offload is not None
    kept = root / ".workbench" / entry.offload.path
    kept.unlink()
    os.mkfifo(kept)
    ref = entry.text().split('read_tool_result("')[1].split('"')[0]
    pages: list[ConversationMessage] = []
    thread = threading.Thread(daemon=True, target=lambda: pages.extend(
        run(root, ("read_tool_result", {"ref": ref}), history=[entry])))
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "reading the kept output blocked"
    assert pages[0].status == "error"
    assert "is a named pipe (FIFO), not a file; it is not read." in pages[0].text()

"""The tools on real files and real processes in a temporary project folder."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, FunctionCall, ToolCall
from core.tools import BUILTIN_TOOLS, tools_for
from core.tools.runner import ToolResult, ToolRunner, ToolStarted
from core.tools.sandbox import Sandbox, detect_sandbox
from core.tools.shell import tool_environment

HAS_BWRAP = detect_sandbox({}).kind == "bubblewrap"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".workbench").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    print('hello')\n\nmain()\n")
    (root / "notes.md").write_text("# Notes\nMust ship by Friday.\n")
    return root


def call(name: str, args: dict[str, object] | str, cid: str = "c1") -> ToolCall:
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolCall(id=cid, function=FunctionCall(name=name, arguments=raw))


def run(root: Path, *calls: ToolCall, sandbox: Sandbox | None = None, policy: str = "always",
        history: list[ConversationMessage] | None = None, **kw: object
        ) -> list[ConversationMessage]:
    runner = ToolRunner(root, root / ".workbench", tools_for("agent"), TokenCounter.for_model(None),
                        policy, sandbox or Sandbox("none", why="test"),  # type: ignore[arg-type]
                        env=tool_environment(), **kw)  # type: ignore[arg-type]

    async def go() -> list[ConversationMessage]:
        return [e.entry async for e in runner.run("conv", list(calls), history or [])
                if isinstance(e, ToolResult)]
    return asyncio.run(go())


def one(root: Path, name: str, args: dict[str, object] | str, *, sandbox: Sandbox | None = None,
        history: list[ConversationMessage] | None = None) -> ConversationMessage:
    return run(root, call(name, args), sandbox=sandbox, history=history)[0]


# --- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "src/../../x"])
def test_paths_outside_the_project_are_refused(root: Path, path: str) -> None:
    entry = one(root, "read_file", {"path": path})
    assert entry.status == "error" and "outside the project folder" in entry.text()


def test_a_symlink_pointing_outside_is_refused_and_says_so(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (root / "link.txt").symlink_to(secret)
    entry = one(root, "read_file", {"path": "link.txt"})
    assert entry.status == "error" and "symbolic link" in entry.text()
    assert "top secret" not in entry.text()
    write = one(root, "write_file", {"path": "link.txt", "content": "x"})
    assert write.status == "error" and secret.read_text() == "top secret"


def test_search_never_reads_through_a_link_out_of_the_project(root: Path,
                                                               tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    (root / "src" / "innocent.txt").symlink_to(secret)
    (root / "src" / "inside.txt").symlink_to(root / "notes.md")
    text = one(root, "search_files", {"pattern": "hunter2|Friday"}).text()
    assert "hunter2" not in text and "src/inside.txt:2: Must ship by Friday." in text


def test_workbench_and_git_are_read_only_to_tools(root: Path) -> None:
    for path in (".workbench/project.json", ".git/HEAD"):
        entry = one(root, "write_file", {"path": path, "content": "x"})
        assert entry.status == "error" and "read-only" in entry.text()
    assert (root / ".git" / "HEAD").read_text().startswith("ref:")
    assert not (root / ".workbench" / "project.json").exists()
    assert "ref: refs/heads/main" in one(root, "read_file", {"path": ".git/HEAD"}).text()


# --- file tools --------------------------------------------------------------------------------


def test_read_file_numbers_lines_and_pages(root: Path) -> None:
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    entry = one(root, "read_file", {"path": "big.txt", "offset": 10, "limit": 3})
    lines = entry.text().splitlines()
    assert lines[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "offset=13" in lines[-1] and "of 500" in lines[-1]


def test_read_file_says_binary_and_refuses_huge_files_with_their_size(root: Path) -> None:
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    entry = one(root, "read_file", {"path": "logo.png"})
    assert entry.status == "error" and "PNG image" in entry.text()
    huge = root / "huge.log"
    with open(huge, "wb") as f:
        f.truncate(500 * 2**20)  # sparse: 500 MB without writing them
    entry = one(root, "read_file", {"path": "huge.log"})
    assert entry.status == "error" and "huge.log is 500 MB: larger than the 20 MB limit" in entry.text()


def test_list_dir_skips_git_and_workbench(root: Path) -> None:
    text = one(root, "list_dir", {"path": ".", "depth": 2}).text()
    assert "src/" in text and "app.py" in text and "notes.md" in text
    assert ".git" not in text and ".workbench" not in text


def test_search_files_answers_path_line_and_refuses_a_bad_pattern(root: Path) -> None:
    text = one(root, "search_files", {"pattern": r"print\("}).text()
    assert text == "src/app.py:2: print('hello')"
    bad = one(root, "search_files", {"pattern": "("})
    assert bad.status == "error" and "not a valid regular expression" in bad.text()


def test_edit_file_replaces_a_unique_snippet_and_explains_missing_or_ambiguous(root: Path) -> None:
    ok = one(root, "edit_file", {"path": "src/app.py", "old": "print('hello')",
                                 "new": "print('bye')"})
    assert ok.status == "ok" and "print('bye')" in (root / "src/app.py").read_text()
    missing = one(root, "edit_file", {"path": "src/app.py", "old": "nothing", "new": "x"})
    assert missing.status == "error" and "not found" in missing.text()
    (root / "dup.txt").write_text("a\nx\nb\nx\n")
    dup = one(root, "edit_file", {"path": "dup.txt", "old": "x", "new": "y"})
    assert dup.status == "error" and "occurs 2 times" in dup.text() and "lines 2, 4" in dup.text()
    assert (root / "dup.txt").read_text() == "a\nx\nb\nx\n"


def test_write_file_creates_folders_and_reports(root: Path) -> None:
    entry = one(root, "write_file", {"path": "docs/new.md", "content": "hi\nthere\n"})
    assert entry.status == "ok" and "Created docs/new.md" in entry.text()
    assert (root / "docs" / "new.md").read_text() == "hi\nthere\n"


# --- model mistakes ----------------------------------------------------------------------------


def test_bad_calls_become_results_the_model_can_read(root: Path) -> None:
    entries = run(root, call("read_file", "{not json", "a"), call("fly", {}, "b"),
                  call("read_file", {"path": 3, "color": "red"}, "c"),
                  call("read_file", {"path": "notes.md"}, "d"))
    assert [e.tool_call_id for e in entries] == ["a", "b", "c", "d"]
    assert "not valid JSON" in entries[0].text()
    assert "no tool named 'fly'" in entries[1].text() and "read_file" in entries[1].text()
    assert "path" in entries[2].text() and "color" in entries[2].text()
    assert [e.status for e in entries] == ["error", "error", "error", "ok"]
    assert "Must ship by Friday." in entries[3].text()


def test_chat_mode_offers_only_read_only_tools() -> None:
    assert {t.name for t in tools_for("chat")} == {"read_file", "list_dir", "search_files",
                                                   "read_tool_result"}
    assert {t.name for t in tools_for("agent")} == {t.name for t in BUILTIN_TOOLS}


# --- run_shell ---------------------------------------------------------------------------------


def test_run_shell_reports_output_and_exit_code(root: Path) -> None:
    entry = one(root, "run_shell", {"command": "echo out; echo err >&2; exit 3"})
    assert entry.status == "error" and entry.exit_code == 3
    assert "[exit code 3]" in entry.text() and "out" in entry.text() and "err" in entry.text()


def test_run_shell_gets_no_api_keys(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    monkeypatch.setenv("WORKBENCH_API_KEY", "sk-other-should-not-leak")
    entry = one(root, "run_shell", {"command": "env"})
    assert "should-not-leak" not in entry.text() and "PATH=" in entry.text()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=pytest.mark.skipif(
    not HAS_BWRAP, reason="bubblewrap cannot run here"))])
def test_a_command_that_never_ends_is_killed_with_everything_it_started(
        root: Path, sandboxed: bool) -> None:
    sandbox = detect_sandbox({}) if sandboxed else None
    started = time.monotonic()
    # what it started in the background would write late.txt three seconds in, had it lived
    entry = one(root, "run_shell", {"command": "(sleep 3; echo never > late.txt) & "
                                               "echo $! > bg.pid; sleep 300", "timeout": 1},
                sandbox=sandbox)
    assert time.monotonic() - started < 20
    assert entry.status == "error" and "timed out after 1 s" in entry.text()
    if not sandboxed:  # the pid is the host's (in the sandbox it is the namespace's)
        pid = int((root / "bg.pid").read_text())
        gone_by = time.monotonic() + 2  # killed; on a loaded machine the kernel takes a moment
        while _alive(pid) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not _alive(pid)
    deadline = started + 4.5
    while time.monotonic() < deadline:
        assert not (root / "late.txt").exists()
        time.sleep(0.1)


def test_a_stop_while_a_command_starts_leaves_nothing_it_printed(root: Path) -> None:
    """The file a command prints into holds what it printed, a key included (the kept result
    is redacted): a Stop that lands while the process is being started (asyncio kills it)
    takes the file away too, as a Stop later on does."""
    runner = ToolRunner(root, root / ".workbench", tools_for("agent"),
                        TokenCounter.for_model(None), "always", Sandbox("none", why="test"),
                        env=tool_environment())

    async def go() -> None:
        events = runner.run("conv", [call("run_shell", {"command": "cat notes.md"})], [])
        async for event in events:
            if isinstance(event, ToolStarted):
                break
        step = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0)  # the command is being started
        step.cancel()
        with pytest.raises(asyncio.CancelledError):
            await step  # (the cancellation ended the runner's generator too)

    asyncio.run(go())
    assert not list((root / ".workbench").rglob(".running-*"))


def test_a_command_that_prints_endlessly_is_stopped(root: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    monkeypatch.setattr("core.tools.shell.MAX_OUTPUT_BYTES", 2 * 2**20)
    entry = one(root, "run_shell", {"command": "yes workbench", "timeout": 60})
    assert entry.status == "error" and "printed more than 2 MB" in entry.text()
    assert entry.offload is not None  # what it printed is kept, previewed in the log
    assert "workbench" in entry.text() and len(entry.text()) < 20_000


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot run here")
def test_bubblewrap_keeps_commands_inside_the_project_and_offline(root: Path) -> None:
    outside = Path("/var/tmp") / f"workbench-escape-{os.getpid()}.txt"  # /tmp is private
    entry = one(root, "run_shell", {
        "command": f"echo inside > made.txt; echo x > {outside} || echo refused-outside; "
                   "echo y > .git/evil || echo refused-git; "
                   "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\" "
                   "|| echo refused-network"}, sandbox=detect_sandbox({}))
    assert (root / "made.txt").read_text() == "inside\n"
    assert not outside.exists() and not (root / ".git" / "evil").exists()
    text = entry.text()
    outside.unlink(missing_ok=True)
    assert "refused-outside" in text and "refused-git" in text and "refused-network" in text


def test_without_a_sandbox_the_description_says_approval_is_the_only_guard() -> None:
    sandbox = detect_sandbox({"WORKBENCH_SANDBOX": "none"})
    assert sandbox.kind == "none" and "approval is the only guard" in sandbox.describe()


# --- offload -----------------------------------------------------------------------------------


def test_a_large_output_is_offloaded_with_a_head_tail_preview_and_paged_back(root: Path) -> None:
    entry = one(root, "run_shell", {"command": "seq 1 200000"}, )
    assert entry.offload is not None and entry.offload.path.startswith("tool-results/conv/c1-")
    full = root / ".workbench" / entry.offload.path
    assert full.read_text().splitlines()[1:] == [str(n) for n in range(1, 200001)]
    text = entry.text()
    assert text.startswith("[exit code 0]\n1\n2\n") and text.rstrip().endswith("200000")
    assert f'read_tool_result("{full.stem}")' in text and "lines /" in text and len(text) < 10_000
    for ref in (full.stem, "c1", entry.id):  # the marker's name, the call's id, the entry's
        page = one(root, "read_tool_result", {"ref": ref, "offset": 100001, "limit": 2},
                   history=[entry]).text()
        assert page.splitlines()[:2] == ["100001\t100000", "100002\t100001"]


def test_an_offloaded_preview_never_splits_a_character(root: Path) -> None:
    line = "ünïcödé " * 40 + "\n"
    (root / "u.txt").write_text(line * 3000)
    entry = one(root, "run_shell", {"command": "cat u.txt"})
    assert entry.offload is not None and "\ufffd" not in entry.text()


def test_binary_output_is_kept_but_not_shown(root: Path) -> None:
    entry = one(root, "run_shell", {"command": "head -c 300000 /dev/urandom | "
                                               "tr -d '\\n' | tr '\\001' '\\000'"})
    assert "binary output" in entry.text() and len(entry.text()) < 1000


# --- todo --------------------------------------------------------------------------------------


def test_the_todo_list_is_replayed_from_the_log(root: Path) -> None:
    from core.tools.todo import todo_state

    first = call("manage_todo_list", {"action": "set", "items": ["read", "fix", "test"]}, "t1")
    second = call("manage_todo_list", {"action": "complete", "number": 1}, "t2")
    entries = run(root, first, second)
    assert "1. [x] read" in entries[1].text() and "2. [ ] fix" in entries[1].text()
    history = [ConversationMessage(role="assistant", tool_calls=[first, second]), *entries]
    assert [(i.text, i.status) for i in todo_state(history)] == [
        ("read", "done"), ("fix", "pending"), ("test", "pending")]


def test_the_network_is_cut_off_unless_allowed_for_the_conversation(root: Path) -> None:
    from core.tools.shell import command_argv

    sandbox = Sandbox("bubblewrap", bwrap="/usr/bin/bwrap")
    assert "--unshare-net" in command_argv(sandbox, root, "true", network=False)
    assert "--unshare-net" not in command_argv(sandbox, root, "true", network=True)
    argv = command_argv(sandbox, root, "true", network=False)
    assert argv[argv.index("--bind") + 1] == str(root)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"] == [
        "/", str(root / ".workbench"), str(root / ".git")]


def test_a_huge_write_is_described_for_approval_not_diffed(root: Path) -> None:
    from core.tools.files import MAX_DIFF_SHOWN, unified_diff

    big = "x\n" * 2_000_000
    text = unified_diff(root, root / "big.txt", None, big)
    assert "too large to show as a diff" in text and "4,000,000 bytes" in text
    medium = "".join(f"line {n}\n" for n in range(40_000))
    text = unified_diff(root, root / "m.txt", None, medium)
    assert len(text) < MAX_DIFF_SHOWN + 100 and "more lines of the diff not shown" in text


def test_an_offload_pointing_out_of_tool_results_is_not_read(root: Path, tmp_path: Path) -> None:
    from core.model import Offload

    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    forged = ConversationMessage(role="tool", tool_call_id="x", content="preview",
                                 offload=Offload(path=f"../../{secret.name}", size=11))
    entry = one(root, "read_tool_result", {"ref": forged.id}, history=[forged])
    assert entry.status == "error" and "outside" in entry.text()
    assert "PRIVATE KEY" not in entry.text()


def test_a_workflow_step_may_list_every_tool_the_agent_has_and_no_other() -> None:
    # A step's tool list is checked below the tools (core.tool_names): the names there must be
    # exactly the tools' own, or a workflow naming a real tool would be refused.
    from core.tool_names import BUILTIN_TOOL_NAMES, COMPLETE_STEP, READ_ONLY_TOOL_NAMES
    from core.tools import BUILTIN_TOOLS, tools_for
    from core.tools.step import COMPLETE_STEP_TOOL
    from core.workflows.workflow import WorkflowError, validate_workflow

    assert {t.name for t in BUILTIN_TOOLS} == BUILTIN_TOOL_NAMES
    assert {t.name for t in tools_for("chat")} == READ_ONLY_TOOL_NAMES
    assert COMPLETE_STEP_TOOL.name == COMPLETE_STEP
    step = {"id": "s", "title": "S", "brief": "b", "done_when": "d"}
    ok = validate_workflow({"name": "w", "steps": [
        {**step, "tools": sorted(BUILTIN_TOOL_NAMES | {COMPLETE_STEP})}]}, "w")
    assert set(ok.steps[0].tools or ()) == BUILTIN_TOOL_NAMES | {COMPLETE_STEP}
    with pytest.raises(WorkflowError, match="unknown tool"):
        validate_workflow({"name": "w", "steps": [{**step, "tools": ["rm_rf"]}]}, "w")


def test_many_reads_in_one_answer_run_a_few_at_a_time_and_answer_in_order(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent reading a folder calls forty tools at once: each runs on a thread, and forty
    threads only fight over the interpreter (the window's thread among them)."""
    import threading

    from core.tools import files
    from core.tools.runner import PARALLEL_READS

    for n in range(12):
        (root / f"part{n}.txt").write_text(f"part number {n}\n")
    real, lock = files._read_page, threading.Lock()
    running, most = [0], [0]

    def counting(*args: object) -> str:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.05)  # a read that takes a moment, so that reads overlap
            return real(*args)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(files, "_read_page", counting)
    results = run(root, *(call("read_file", {"path": f"part{n}.txt"}, f"c{n}")
                          for n in range(12)))
    assert [r.tool_call_id for r in results] == [f"c{n}" for n in range(12)]
    assert all(f"part number {n}" in r.text() for n, r in enumerate(results))
    assert 1 < most[0] <= PARALLEL_READS

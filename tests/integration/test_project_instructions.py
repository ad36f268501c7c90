"""Project instructions (AGENTS.md, else CLAUDE.md) through the real parts: `workbench send`
against the loopback server carries them in every mode's system prefix, after our rules and
before the mode's part; `workbench context` names them with their tokens; a conversation can
turn them off (only that part changes); a changed file is read again, with a new compaction
that says why."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from core.context.instructions import MAX_CHARS
from core.context.service import ProjectContext
from core.llm.tokens import TokenCounter
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.helpers.trajectories import make_agent_session

RULES = "# House rules\n\nRun `make check` before saying a change is done. Quote paths exactly."


@pytest.fixture
def project_dir(project_dir: Path) -> Path:
    project_dir.mkdir()
    return project_dir


def send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer,
         *args: object) -> str:
    server.script(Answer("ok"))
    code, _, err = cli(capsys, "send", project, *args, "--model", MODEL, "--api-base",
                       server.url, "hello")
    assert code == 0, err
    return err.split()[1] if "--new" in args else ""


def system_of(server: FakeLLMServer) -> str:
    return str(server.requests[-1].body["messages"][0]["content"])


def test_agents_md_is_its_own_part_after_our_rules_in_every_mode(capsys: pytest.CaptureFixture[str],
                                                                 project_dir: Path,
                                                                 llm_server: FakeLLMServer) -> None:
    (project_dir / "AGENTS.md").write_text(RULES + "\n", encoding="utf-8")
    conv = send(capsys, project_dir, llm_server, "--new")
    chat = system_of(llm_server)
    send(capsys, project_dir, llm_server, "-c", conv, "--mode", "agent")
    agent = system_of(llm_server)
    for prefix in (chat, agent):
        assert "Run `make check` before saying a change is done." in prefix
        assert "from AGENTS.md in the project folder" in prefix
    # The same bytes up to and including the instructions: switching modes keeps that prefix.
    end = chat.index(RULES) + len(RULES)
    assert agent[:end] == chat[:end]
    assert chat.index(RULES) > 0  # our rules come first
    assert chat[end:].lstrip().startswith("Mode: chat")
    assert "Mode: agent" not in agent[:end]


def test_claude_md_is_read_only_when_there_is_no_agents_md(capsys: pytest.CaptureFixture[str],
                                                           project_dir: Path,
                                                           llm_server: FakeLLMServer) -> None:
    (project_dir / "CLAUDE.md").write_text("Claude's rules: tabs, never spaces.",
                                           encoding="utf-8")
    (project_dir / "sub").mkdir()
    (project_dir / "sub" / "AGENTS.md").write_text("nested: never read", encoding="utf-8")
    conv = send(capsys, project_dir, llm_server, "--new")
    assert "Claude's rules" in system_of(llm_server) and "nested" not in system_of(llm_server)
    (project_dir / "AGENTS.md").write_text("Agents' rules win.", encoding="utf-8")
    send(capsys, project_dir, llm_server, "-c", conv)
    assert "Agents' rules win." in system_of(llm_server)
    assert "Claude's rules" not in system_of(llm_server)


def test_context_names_the_part_with_its_tokens_and_they_add_up(capsys: pytest.CaptureFixture[str],
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    (project_dir / "AGENTS.md").write_text(RULES, encoding="utf-8")
    conv = send(capsys, project_dir, llm_server, "--new")
    code, out, err = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("project instructions:"))
    tokens = int(line.split(", ")[1].split()[0].replace(",", ""))
    assert line.startswith("project instructions: AGENTS.md") and 20 < tokens < 60
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL, "--json")
    report = json.loads(out)["report"]
    assert report["instructions"] == "AGENTS.md" and report["instructions_sent"]
    totals = report["totals"]
    assert totals["instructions"] == tokens  # the file's size, by our count: calibration keeps it
    if report["calibration"] != 1.0:  # a request's share of it, which it does move, is said
        shown = round(totals["instructions"] * report["calibration"])
        assert line.endswith(f" ({shown:,} in a request, calibrated)")
    assert sum(v for k, v in totals.items() if k != "reserved") == report["used"]


def test_turning_them_off_changes_only_that_part(capsys: pytest.CaptureFixture[str],
                                                 project_dir: Path,
                                                 llm_server: FakeLLMServer) -> None:
    (project_dir / "AGENTS.md").write_text(RULES, encoding="utf-8")
    conv = send(capsys, project_dir, llm_server, "--new")
    with Project.open(project_dir) as p:
        p.conversations.update_meta(conv, project_instructions=False)
    send(capsys, project_dir, llm_server, "-c", conv)
    before, after = llm_server.requests[-2].body["messages"], llm_server.requests[-1].body["messages"]
    assert RULES not in after[0]["content"]
    part = before[0]["content"].split("\n\n# House rules")[0].rsplit("\n\n", 1)[1]
    assert after[0]["content"] == before[0]["content"].replace(f"{part}\n\n{RULES}\n\n", "")
    assert after[1] == before[1]  # the history is as it was
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL)
    assert "project instructions: AGENTS.md not sent (turned off for this conversation)" in out


def test_a_long_file_is_cut_and_says_so(project_dir: Path) -> None:
    (project_dir / "AGENTS.md").write_text("x" * (MAX_CHARS + 5000), encoding="utf-8")
    with Project.open(project_dir) as p:
        conv = p.conversations.create("c").id
        p.conversations.append(conv, TokenCounter("o200k_base").with_count(
            make_agent_session(1, seed=1)[0]))
        built = ProjectContext.for_project(p).preview(conv, LLMSettings(model=MODEL))
    system = built.messages[0]["content"]
    assert "x" * MAX_CHARS in system and "x" * (MAX_CHARS + 1) not in system
    assert f"it has {MAX_CHARS + 5000:,} characters" in system
    assert built.report.instructions_note.startswith(f"AGENTS.md has {MAX_CHARS + 5000:,}")


def test_a_binary_or_unreadable_file_is_not_sent_and_the_report_says_why(project_dir: Path) -> None:
    (project_dir / "AGENTS.md").write_bytes(b"\x89PNG\r\n\x00\x00binary")
    with Project.open(project_dir) as p:
        conv = p.conversations.create("c").id
        p.conversations.append(conv, TokenCounter("o200k_base").with_count(
            make_agent_session(1, seed=1)[0]))
        built = ProjectContext.for_project(p).preview(conv, LLMSettings(model=MODEL))
    assert "PNG" not in built.messages[0]["content"]
    assert built.report.instructions_note == "AGENTS.md is not a text file; it is not sent."
    assert built.report.totals["instructions"] == 0


def test_a_changed_file_is_read_again_and_the_new_compaction_names_it(project_dir: Path) -> None:
    counter = TokenCounter("o200k_base")
    (project_dir / "AGENTS.md").write_text(RULES, encoding="utf-8")
    settings = LLMSettings(model=MODEL, context_window=6000, max_output_tokens=500)
    with Project.open(project_dir) as p:
        conv = p.conversations.create("long").id
        p.conversations.append_many(conv, [counter.with_count(m)
                                           for m in make_agent_session(14, seed=3)])
        context = ProjectContext.for_project(p)
        first = context.preview(conv, settings)
        assert first.report.compaction.startswith("new compaction")
        again = context.preview(conv, settings)
        assert again.report.compaction.startswith("the kept compaction, reused")
        path = project_dir / "AGENTS.md"
        path.write_text(RULES + "\nAlso: keep commits small.", encoding="utf-8")
        os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)  # a coarse clock
        changed = context.preview(conv, settings)
    assert "keep commits small" in changed.messages[0]["content"]
    assert changed.report.compaction == \
        "new compaction: the project instructions (AGENTS.md) changed"


def test_an_agents_md_too_long_for_the_window_is_named_not_the_message(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from core.llm.runtime import load_litellm

    load_litellm()  # refused before any request: the import it starts must not outlive the test
    (project_dir / "AGENTS.md").write_text("Quote paths exactly, always. " * 1000,
                                           encoding="utf-8")  # cut at MAX_CHARS: still 5k tokens
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "4000")
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "hi2")
    assert code != 0 and not llm_server.requests
    assert "the project's instructions in AGENTS.md" in err and "Shorten AGENTS.md" in err
    assert "Shorten the message" not in err


def test_agents_md_linked_outside_the_project_is_not_sent(capsys: pytest.CaptureFixture[str],
                                                          project_dir: Path, tmp_path: Path,
                                                          llm_server: FakeLLMServer) -> None:
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n")
    (project_dir / "AGENTS.md").symlink_to(secret)  # what a hostile clone can ship
    conv = send(capsys, project_dir, llm_server, "--new")
    assert "PRIVATE KEY" not in json.dumps(llm_server.requests[-1].body)
    copies = list((project_dir / ".workbench" / "requests").rglob("*.json"))
    assert not any("PRIVATE KEY" in c.read_text(encoding="utf-8") for c in copies)
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL)
    assert "AGENTS.md leads outside the project folder (a symbolic link); it is not sent." \
        in out


def _preview_note(project_dir: Path) -> str:
    """The report's note on the instructions, from a preview run with a deadline (a read that
    blocks on a FIFO would never return)."""
    notes: list[str] = []

    def preview() -> None:
        with Project.open(project_dir) as p:
            conv = p.conversations.create("c").id
            built = ProjectContext.for_project(p).preview(conv, LLMSettings(model=MODEL))
            notes.append(built.report.instructions_note)

    thread = threading.Thread(target=preview, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "reading AGENTS.md blocked"
    return notes[0]


def test_a_fifo_or_a_sparse_giant_is_refused_unread(project_dir: Path) -> None:
    os.mkfifo(project_dir / "AGENTS.md")
    assert _preview_note(project_dir) == \
        "AGENTS.md is a named pipe (FIFO), not a file; it is not sent."
    (project_dir / "AGENTS.md").unlink()
    with open(project_dir / "AGENTS.md", "wb") as f:
        f.truncate(2**30)  # sparse: reading it whole took 1.2 GB of memory
    assert _preview_note(project_dir) == \
        "AGENTS.md is 1.0 GB: larger than the 2 MB limit; it is not sent."

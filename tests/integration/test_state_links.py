"""What a cloned project's `.workbench/` can ship that the app's own reads and writes would
follow: links (to a shell's startup file, to the root folder), a checkpoint store with linked
folders, limits lifted above the user's, a negative cost. Each is refused or ignored, and the
files outside the project are untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.checkpoints.store import Store
from core.checkpoints.views import turns
from core.cost import spend
from core.model import ConversationMessage
from core.settings import GlobalSettings, resolve_llm_settings
from core.store.project import Project
from tests.helpers.cli import cli


def test_links_in_the_state_folder_are_removed_as_the_project_opens(
        capsys: pytest.CaptureFixture[str], project_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "home" / ".bash_aliases"
    victim.parent.mkdir()
    with Project.open(project_dir) as p:
        conv = p.conversations.create().id
    log = project_dir / ".workbench" / "conversations" / conv / "messages.jsonl"
    log.unlink(missing_ok=True)
    log.symlink_to(victim)  # dangling: an append would create it
    results = project_dir / ".workbench" / "tool-results"
    results.rmdir()
    results.symlink_to("/")  # read_tool_result would read any file
    code, _, err = cli(capsys, "pin", project_dir, "-c", conv, "nothing-such")
    assert "removed a symbolic link the project's .workbench/ held" in err
    assert str(victim) in err and not log.is_symlink() and not results.is_symlink()
    assert not victim.exists()  # nothing was ever written through the link


def test_a_state_folder_that_is_a_link_is_refused(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    Project.open(elsewhere).close()
    project = tmp_path / "cloned"
    project.mkdir()
    (project / ".workbench").symlink_to(elsewhere / ".workbench")
    code, _, err = cli(capsys, "list", project)
    assert code == 1 and ".workbench is a symbolic link" in err


def test_a_shipped_checkpoint_store_with_linked_folders_writes_nothing_outside(
        project_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "victim-dir"
    outside.mkdir()
    (outside / "exclude").write_text("user's own content\n", encoding="utf-8")
    with Project.open(project_dir) as p:
        conv = p.conversations.create().id
        store = project_dir / ".workbench" / "checkpoints.git"
        store.mkdir()
        (store / "info").symlink_to(outside)
        (store / "refs").symlink_to(outside)
        turns(Store(p.root, p.state), conv)
    assert sorted(os.listdir(outside)) == ["exclude"]
    assert (outside / "exclude").read_text(encoding="utf-8") == "user's own content\n"


def test_reading_checkpoints_read_only_finishes_no_restore_and_runs_no_shipped_config(
        project_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "FSMONITOR-RAN"
    with Project.open(project_dir) as p:
        conv = p.conversations.create().id
        Store(p.root, p.state).git.prepare()
    store = project_dir / ".workbench" / "checkpoints.git"
    (store / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n", encoding="utf-8")
    journal = project_dir / ".workbench" / "checkpoints.journal"
    journal.write_text(json.dumps({"conversation": conv, "target": "0" * 40, "paths": []}))
    with Project.open(project_dir, read_only=True) as p:
        try:
            turns(Store(p.root, p.state, read_only=True), conv)
        except Exception as e:  # the store says it is not as the app left it
            assert "not as this app left it" in str(e)
    assert journal.exists() and not marker.exists()


def test_a_project_may_lower_the_users_limits_never_lift_them() -> None:
    mine = GlobalSettings(cost_cap=1.0, project_cost_cap=5.0)
    lifted = resolve_llm_settings(env={}, global_settings=mine, project={
        "cost_cap": 1e9, "project_cost_cap": 1e9, "step_limit": 100_000})
    assert (lifted.cost_cap, lifted.project_cost_cap, lifted.step_limit) == (1.0, 5.0, 50)
    lowered = resolve_llm_settings(env={}, global_settings=mine, project={
        "cost_cap": 0.5, "step_limit": 10})
    assert (lowered.cost_cap, lowered.step_limit) == (0.5, 10)


def test_a_negative_cost_in_a_shipped_log_cancels_nothing() -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50}
    paid = ConversationMessage(role="assistant", content="a", model="openai/gpt-4o-mini",
                               usage=usage, cost_usd=0.5)
    forged = ConversationMessage(role="assistant", content="b", model="openai/my-model",
                                 usage=usage, cost_usd=-1e9)
    assert spend([paid, forged]).usd == 0.5


def test_the_list_ignores_a_negative_cost(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create().id
        log = p.conversations.root / conv / "messages.jsonl"
        log.write_text('{"id":"x","role":"assistant","content":"a","cost_usd":-1000000000.0}\n'
                       '{"id":"y","role":"assistant","content":"b","cost_usd":0.25}\n')
        row = next(r for r in p.conversations.list() if r.id == conv)
    assert row.cost == 0.25 and row.message_count == 2

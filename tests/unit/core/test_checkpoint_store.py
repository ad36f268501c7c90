"""core.checkpoints on real folders with the real git binary: odd names, links, the
executable bit, a turn that makes a folder where a file was, restores that refuse to write
outside the project, and the diff split per file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from core.checkpoints.restore import plan_undo, restore
from core.checkpoints.store import GitFailed, Store
from core.checkpoints.turn import Checkpointer
from core.checkpoints.views import file_diffs, turn_diff, turns, undo
from tests.helpers.checkpoints import files

ODD = ["with space.txt", "ünïcödé.md", "star*.txt", "[brackets].txt", "-dash.txt",
       "deep/er/still.txt", ":colon.txt"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "p"
    (folder / ".workbench").mkdir(parents=True)
    (folder / "keep.txt").write_text("keep\n")
    (folder / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "tool.sh").chmod(0o755)
    (folder / "data").write_text("a file that becomes a folder\n")
    return folder


def one_turn(root: Path, change: Callable[[], None], entry: str = "e1") -> None:
    recorder = Checkpointer(root, root / ".workbench").turn("conv", lambda: entry)
    assert recorder.before() is None
    change()
    assert recorder.after() is None


def test_odd_names_links_modes_and_a_file_become_folder_are_restored_exactly(root: Path) -> None:
    os.symlink("keep.txt", root / "link")
    before = files(root)
    modes = {p: os.lstat(root / p).st_mode & 0o111 for p in before}

    def change() -> None:
        for name in ODD:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(f"{name}\n")
        (root / "tool.sh").chmod(0o644)
        (root / "link").unlink()
        os.symlink("tool.sh", root / "link")
        (root / "data").unlink()
        (root / "data").mkdir()
        (root / "data" / "inside.txt").write_text("now a folder\n")

    one_turn(root, change)
    store = Store(root, root / ".workbench")
    [turn] = turns(store, "conv")
    assert sorted(turn.added) == sorted([*ODD, "data/inside.txt"])
    assert sorted(turn.modified) == ["link", "tool.sh"] and turn.deleted == ["data"]
    undo(store, "conv", "e1")
    assert files(root) == before
    assert os.readlink(root / "link") == "keep.txt"
    assert {p: os.lstat(root / p).st_mode & 0o111 for p in before} == modes
    assert not (root / "deep").exists()


def test_a_restore_never_writes_through_a_link_out_of_the_project(root: Path,
                                                                  tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub").mkdir()
    (root / "sub" / "x.txt").write_text("x\n")

    def change() -> None:
        (root / "sub" / "x.txt").write_text("changed\n")

    one_turn(root, change)
    store = Store(root, root / ".workbench")
    plan = plan_undo(store.events("conv"), "e1")
    # the folder is swapped for a link elsewhere before the restore
    (root / "sub" / "x.txt").unlink()
    (root / "sub").rmdir()
    os.symlink(outside, root / "sub")
    with pytest.raises(GitFailed, match="outside the project"):
        restore(store, "conv", plan, force=True)
    assert list(outside.iterdir()) == []
    assert not (root / ".workbench" / "checkpoints.journal").exists()  # nothing was begun


def test_the_diff_splits_per_file_with_its_added_and_removed_lines(root: Path) -> None:
    def change() -> None:
        (root / "keep.txt").write_text("kept\nand more\n")
        (root / "new.txt").write_text("one\ntwo\n")
        (root / "tool.sh").unlink()

    one_turn(root, change)
    diff = file_diffs(turn_diff(Store(root, root / ".workbench"), "conv", "e1"))
    got = {d.path: (d.status, d.added, d.removed) for d in diff}
    assert got == {"keep.txt": ("M", 2, 1), "new.txt": ("A", 2, 0), "tool.sh": ("D", 0, 2)}


def test_unchanged_files_cost_nothing_and_a_turn_without_changes_is_not_listed(
        root: Path) -> None:
    one_turn(root, lambda: None)
    store = Store(root, root / ".workbench")
    points = store.checkpoints("conv")
    assert [p.phase for p in points] == ["before", "after"]
    assert points[0].tree == points[1].tree
    assert turns(store, "conv") == []


def test_files_are_kept_byte_for_byte_whatever_the_gitattributes_say(root: Path) -> None:
    (root / ".gitattributes").write_text("* text eol=crlf\n*.crlf text\n*.id ident\n")
    (root / "lf.txt").write_bytes(b"one\ntwo\n")
    (root / "win.crlf").write_bytes(b"one\r\ntwo\r\n")
    (root / "x.id").write_bytes(b"$Id$\n")
    before = files(root)

    def change() -> None:
        for name in ("lf.txt", "win.crlf", "x.id"):
            (root / name).write_bytes(b"changed\n")

    one_turn(root, change)
    undo(Store(root, root / ".workbench"), "conv", "e1")
    assert files(root) == before

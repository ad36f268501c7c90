"""Issue 8 through the real command line: bad input is one sentence, exit 1, nothing created."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import EXIT_FAIL, EXIT_OK
from core.model import ConversationMessage
from core.store.errors import ReadOnlyError
from core.store.project import Project
from tests.helpers.cli import cli


def one_sentence(err: str) -> bool:
    return "Traceback" not in err and len(err.strip().splitlines()) == 1


def conversation_folders(project: Path) -> list[str]:
    root = project / ".workbench" / "conversations"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def test_nesting_too_deep_for_a_message_is_refused_before_anything_is_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    deep: object = "bottom"
    for _ in range(400):  # deep enough to break writing it, not deep enough to break reading
        deep = [deep]
    source = tmp_path / "deep.json"
    source.write_text(json.dumps({"messages": [
        {"role": "user", "content": "fine"},
        {"role": "user", "content": [{"type": "input_text", "text": "x", "nested": deep}]}]}))
    code, out, err = cli(capsys, "import", tmp_path / "proj", source)
    assert code == EXIT_FAIL and one_sentence(err) and "nested too deeply" in err
    assert "message 2" in err
    assert conversation_folders(tmp_path / "proj") == []


def test_a_title_that_is_not_text_never_leaves_a_half_import(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "a.json"
    source.write_text(json.dumps({"messages": [{"role": "user", "content": "hello"}]}))
    # argv bytes that are not UTF-8 reach Python as lone surrogates
    code, out, err = cli(capsys, "import", tmp_path / "proj", source, "--title", "bad\udcff")
    assert "Traceback" not in err
    if code == EXIT_OK:  # kept, with the undecodable byte shown as a replacement character
        with Project.open(tmp_path / "proj") as p:
            [row] = p.conversations.list()
            assert row.title.startswith("bad") and row.message_count == 1
    else:
        assert code == EXIT_FAIL and one_sentence(err)
    names = conversation_folders(tmp_path / "proj")
    assert not any(n.startswith(".") for n in names)  # no hidden half import left


def test_a_message_with_a_lone_surrogate_is_still_saved(project: Project) -> None:
    """Qt strings can hold half a surrogate pair (a broken paste): the message is kept, the
    half character becomes U+FFFD, and the log stays readable."""
    store = project.conversations
    conv = store.create()
    store.append(conv.id, ConversationMessage(role="user", content="broken \ud83d paste"))
    store.append(conv.id, ConversationMessage(role="user", content="after"))
    store._loaded.clear()
    loaded = store.load(conv.id)
    assert loaded.problems == []
    assert [m.text() for m in loaded.messages] == ["broken \ufffd paste", "after"]


def test_one_broken_conversation_never_hides_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    with Project.open(project) as p:
        good = p.conversations.import_conversation(
            "good one", [ConversationMessage(role="user", content="hello")])
        bad = p.conversations.import_conversation(
            "broken one", [ConversationMessage(role="user", content="lost?")])
    log = project / ".workbench" / "conversations" / bad.id / "messages.jsonl"
    log.unlink()
    log.mkdir()  # a folder where the log should be (a bad sync, a restore gone wrong)
    code, out, err = cli(capsys, "list", project)
    assert code == EXIT_OK and good.id in out and "good one" in out
    assert "Traceback" not in err
    code, out, err = cli(capsys, "export", project, "-c", bad.id)
    assert code == EXIT_FAIL and one_sentence(err) and "messages.jsonl" in err
    code, out, err = cli(capsys, "export", project, "-c", good.id)
    assert code == EXIT_OK and "hello" in out


def test_metadata_that_cannot_be_read_is_one_sentence_when_changed(project: Project) -> None:
    from core.store.errors import StoreError

    store = project.conversations
    conv = store.create("title")
    meta = store.root / conv.id / "conversation.json"
    meta.unlink()
    meta.mkdir()
    assert store.load(conv.id).problems  # shown with defaults, reported
    with pytest.raises(StoreError) as caught:
        store.update_meta(conv.id, mode="agent")
    assert "\n" not in str(caught.value) and "conversation.json" in str(caught.value)
    assert sorted(x.name for x in meta.parent.iterdir()) == ["conversation.json", "messages.jsonl"]


@pytest.mark.parametrize("fmt", ["openai", "jsonl", "markdown"])
def test_every_export_of_a_conversation_with_a_pending_answer_has_its_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    project = tmp_path / "proj"
    with Project.open(project) as p:
        conv = p.conversations.import_conversation(
            "crashed", [ConversationMessage(role="user", content="question")])
        (p.conversations.root / conv.id / "streaming.partial.json").write_text(
            json.dumps({"text": "the answer that was arri"}))
        # the window that crashed is gone; another one has the project open while we export
        code, out, err = cli(capsys, "export", project, "-c", conv.id, "--format", fmt)
        assert code == EXIT_OK and "question" in out and "the answer that was arri" in out
        assert "pending (24 characters)" in err
        code, out, err = cli(capsys, "list", project)
        assert "pending" in out
    with Project.open(project) as p:  # opened for writing: it becomes the entry it said
        p.conversations.load(conv.id)
    code, out, err = cli(capsys, "export", project, "-c", conv.id, "--format", "jsonl")
    assert "pending" not in err
    assert [json.loads(line).get("content") for line in out.splitlines()] == [
        "question", "the answer that was arri"]


def _send_in_another_process(project: Path, conv: str) -> subprocess.CompletedProcess[str]:
    """`workbench send` from a second process (no server needed: a project it may not write
    is refused before any request)."""
    return subprocess.run(
        [sys.executable, "-m", "app", "send", str(project), "-c", conv, "--model",
         "openai/test-model", "--api-base", "http://127.0.0.1:9", "from the second process"],
        capture_output=True, text=True, timeout=120, check=False)


def test_deleting_the_lock_file_does_not_let_a_second_process_write(project: Project) -> None:
    conv = project.conversations.create("one writer").id
    (project.state / "lock").unlink()  # a `git clean -fdX`, a tidy-up
    done = _send_in_another_process(project.root, conv)
    assert done.returncode != 0 and "has this project open" in done.stderr, done.stderr
    project.conversations.append(conv, ConversationMessage(role="user", content="still mine"))
    assert [m.text() for m in project.conversations.load(conv).messages] == ["still mine"]


def test_a_state_folder_replaced_while_open_stops_this_process_writing(project: Project) -> None:
    conv = project.conversations.create("moved").id
    project.state.rename(project.root / "old-state")
    with Project.open(project.root) as other:  # a new project where the old one was
        assert not other.read_only
        mine = other.conversations.create("theirs").id
        with pytest.raises(ReadOnlyError, match="moved, deleted or replaced"):
            project.conversations.append(conv, ConversationMessage(role="user", content="x"))
        assert [c.id for c in other.conversations.list()] == [mine]

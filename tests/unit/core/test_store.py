from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.model import ConversationMessage
from core.store.errors import ConversationNotFound, ProjectPathError, ReadOnlyError
from core.store.migrations import current_version
from core.store.project import Project


def user(text: str) -> ConversationMessage:
    return ConversationMessage(role="user", content=text)


def log_path(project: Project, conv_id: str) -> Path:
    return project.state / "conversations" / conv_id / "messages.jsonl"


def test_new_project_has_the_documented_layout(project: Project) -> None:
    assert (project.state / "project.json").is_file()
    info = json.loads((project.state / "project.json").read_text())
    assert info["schema_version"] == current_version()
    for sub in ("conversations", "tool-results", "requests"):
        assert (project.state / sub).is_dir()
    assert not project.read_only


def test_conversation_lifecycle(project: Project) -> None:
    store = project.conversations
    a = store.create("First")
    b = store.create("Second")
    store.append(a.id, user("hello"))
    assert [r.title for r in store.list()][0] == "First"  # most recently active first
    store.rename(b.id, "  Renamed   twice ")
    assert store.meta(b.id).title == "Renamed twice"
    trashed = store.delete(a.id)
    assert trashed.is_dir() and (trashed / "messages.jsonl").read_bytes()  # kept, not destroyed
    assert [r.id for r in store.list()] == [b.id]
    with pytest.raises(ConversationNotFound):
        store.load(a.id)


def test_appended_messages_come_back_in_order(project: Project) -> None:
    c = project.conversations.create()
    sent = [user(f"message {i}") for i in range(20)]
    for m in sent:
        project.conversations.append(c.id, m)
    assert project.conversations.load(c.id).messages == sent


def test_id_prefix_resolves_when_unique(project: Project) -> None:
    c = project.conversations.create()
    assert project.conversations.resolve(c.id[:10]) == c.id
    with pytest.raises(ConversationNotFound):
        project.conversations.resolve("zzzzzz")


def test_torn_last_line_is_quarantined_and_the_rest_loads(project: Project) -> None:
    c = project.conversations.create()
    project.conversations.append(c.id, user("kept"))
    with open(log_path(project, c.id), "ab") as f:
        f.write(b'{"role": "user", "content": "half a li')
    reopened = Project.open(project.root, read_only=True)  # a second look changes nothing
    assert [m.text() for m in reopened.conversations.load(c.id).messages] == ["kept"]
    project.close()
    p2 = Project.open(project.root)
    loaded = p2.conversations.load(c.id)
    assert [m.text() for m in loaded.messages] == ["kept"]
    assert any("unfinished last line" in p for p in loaded.problems)
    corrupt = list(log_path(p2, c.id).parent.glob("messages.jsonl.corrupt-*"))
    assert len(corrupt) == 1 and b"half a li" in corrupt[0].read_bytes()
    # the next append lands on a clean line and everything loads
    p2.conversations.append(c.id, user("after"))
    assert [m.text() for m in p2.conversations.load(c.id).messages] == ["kept", "after"]
    p2.close()


def test_append_after_a_crash_never_glues_onto_the_torn_line(project: Project) -> None:
    c = project.conversations.create()
    project.conversations.append(c.id, user("one"))
    with open(log_path(project, c.id), "ab") as f:
        f.write(b'{"role": "us')
    project.close()
    p2 = Project.open(project.root)
    p2.conversations.append(c.id, user("two"))  # no load() first
    assert [m.text() for m in p2.conversations.load(c.id).messages] == ["one", "two"]
    p2.close()


def test_garbage_and_invalid_utf8_in_the_middle_are_quarantined(project: Project) -> None:
    c = project.conversations.create()
    project.conversations.append(c.id, user("first"))
    with open(log_path(project, c.id), "ab") as f:
        f.write(b"this is not json\n")
        f.write(b'{"role": "user", "content": "\xff\xfe bad bytes"}\n')
        f.write(b'{"role": "tool", "content": "no call id"}\n')
    project.conversations.append(c.id, user("last"))
    loaded = project.conversations.load(c.id)
    assert [m.text() for m in loaded.messages] == ["first", "last"]
    assert sum("could not be read" in p for p in loaded.problems) == 3
    corrupt = next(log_path(project, c.id).parent.glob("messages.jsonl.corrupt-*")).read_bytes()
    assert b"this is not json" in corrupt and b"\xff\xfe bad bytes" in corrupt
    assert b"no call id" in corrupt


def test_project_from_a_newer_version_opens_read_only(project_dir: Path) -> None:
    Project.open(project_dir).close()
    info_path = project_dir / ".workbench" / "project.json"
    info = json.loads(info_path.read_text())
    info["schema_version"] = current_version() + 5
    info_path.write_text(json.dumps(info))
    before = info_path.read_bytes()
    p = Project.open(project_dir)
    assert p.read_only and "newer Context Workbench" in (p.read_only_reason or "")
    with pytest.raises(ReadOnlyError, match="newer"):
        p.conversations.create()
    assert info_path.read_bytes() == before
    p.close()


def test_older_schema_runs_the_pending_migrations_in_order(project_dir: Path) -> None:
    Project.open(project_dir).close()
    calls: list[str] = []

    def add_flag(state: Path, info: dict[str, Any]) -> dict[str, Any]:
        calls.append("add_flag")
        return {**info, "flag": True}

    def note_it(state: Path, info: dict[str, Any]) -> dict[str, Any]:
        calls.append("note_it")
        (state / "migrated.txt").write_text("yes")
        return info

    migrations = [("add_flag", add_flag), ("note_it", note_it)]
    p = Project.open(project_dir, migrations=migrations)
    assert calls == ["add_flag", "note_it"] and p.migrations_applied == calls
    info = json.loads((project_dir / ".workbench" / "project.json").read_text())
    assert info["schema_version"] == 3 and info["flag"] is True
    p.close()
    Project.open(project_dir, migrations=migrations).close()
    assert calls == ["add_flag", "note_it"]  # not run twice


def test_second_opener_gets_a_read_only_view(project: Project) -> None:
    c = project.conversations.create("mine")
    project.conversations.append(c.id, user("hi"))
    other = Project.open(project.root)
    assert other.read_only and "Another Context Workbench" in (other.read_only_reason or "")
    assert [m.text() for m in other.conversations.load(c.id).messages] == ["hi"]
    with pytest.raises(ReadOnlyError):
        other.conversations.append(c.id, user("second writer"))
    other.close()
    project.close()
    third = Project.open(project.root)  # lock released with the first
    assert not third.read_only
    third.close()


def test_project_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(ProjectPathError, match="is a file"):
        Project.open(f)
    with pytest.raises(ProjectPathError, match="part of the path is a file"):
        Project.open(f / "sub")


def test_unwritable_location_is_refused_clearly() -> None:
    target = Path("/sys/context-workbench-test")
    if os.access("/sys", os.W_OK) and not Path("/sys/kernel").exists():
        pytest.skip("no unwritable location on this machine")
    with pytest.raises(ProjectPathError, match="Cannot create a project"):
        Project.open(target)


def test_unreadable_project_json_opens_read_only_and_keeps_the_file(project_dir: Path) -> None:
    Project.open(project_dir).close()
    info_path = project_dir / ".workbench" / "project.json"
    info_path.write_bytes(b"{ not json")
    p = Project.open(project_dir)
    assert p.read_only and "cannot be read" in (p.read_only_reason or "")
    assert info_path.read_bytes() == b"{ not json"
    p.close()


def test_index_is_rebuilt_when_missing_or_stale(project: Project) -> None:
    store = project.conversations
    c = store.create("indexed")
    assert store.list()[0].message_count == 0
    store.append(c.id, user("one"))
    store.append(c.id, user("two"))
    assert store.list()[0].message_count == 2  # stale row refreshed
    store.close()  # the index is written on a thread of its own: wait for it
    (store.root / "index.json").unlink()
    rows = store.list()
    assert [(r.title, r.message_count) for r in rows] == [("indexed", 2)]
    (store.root / "index.json").write_text("garbage")
    assert store.list()[0].title == "indexed"


def test_corrupt_conversation_metadata_still_shows_the_messages(project: Project) -> None:
    c = project.conversations.create("x")
    project.conversations.append(c.id, user("still here"))
    (project.conversations.root / c.id / "conversation.json").write_text("{oops")
    loaded = project.conversations.load(c.id)
    assert loaded.meta.title == "New conversation"  # a default, never an error message
    assert any("conversation.json could not be read" in p for p in loaded.problems)
    assert [m.text() for m in loaded.messages] == ["still here"]


def test_loaded_conversations_are_reused_but_never_stale(project: Project) -> None:
    c = project.conversations.create()
    project.conversations.append(c.id, user("one"))
    first = project.conversations.load(c.id).messages
    project.conversations.append(c.id, user("two"))  # through the store: cache extended
    assert [m.text() for m in project.conversations.load(c.id).messages] == ["one", "two"]
    first.append(user("caller's own list"))  # callers get copies
    assert len(project.conversations.load(c.id).messages) == 2
    from core.store.log import encode_line

    with open(log_path(project, c.id), "ab") as f:  # another process appends behind our back
        f.write(encode_line(user("three")))
    assert [m.text() for m in project.conversations.load(c.id).messages] == ["one", "two", "three"]


# --- every content form reaches the disk and comes back (issue 8, item 1) ---------------------

_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6)
_extras = st.dictionaries(st.sampled_from(["cache_control", "x_note", "meta"]), _json_value,
                          max_size=2)
_user_part = st.one_of(
    st.builds(lambda t, e: {"type": "text", "text": t, **e}, _text, _extras),
    st.builds(lambda u, d: {"type": "image_url", "image_url": {"url": u, **d}}, _text,
              st.sampled_from([{}, {"detail": "low"}, {"detail": "high"}, {"detail": "auto"}])),
    st.builds(lambda u: {"type": "image_url", "image_url": u}, _text),
    st.builds(lambda d, f: {"type": "input_audio", "input_audio": {"data": d, "format": f}},
              _text, st.sampled_from(["wav", "mp3"])),
    st.builds(lambda f: {"type": "file", "file": f},
              st.fixed_dictionaries({}, optional={"file_id": _text, "filename": _text,
                                                  "file_data": _text})),
    st.builds(lambda k, e: {"type": k, **e}, st.sampled_from(["input_text", "video_url"]),
              _extras),
)
_assistant_part = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda r: {"type": "refusal", "refusal": r}, _text),
)
_message = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c},
              _text.filter(bool) | st.lists(_user_part, min_size=1, max_size=4)),
    st.builds(lambda c: {"role": "system", "content": c}, _text),
    st.builds(lambda c: {"role": "assistant", "content": c},
              _text.filter(bool) | st.lists(_assistant_part, min_size=1, max_size=3)),
)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(_message, min_size=1, max_size=5))
def test_every_content_form_written_to_the_store_reads_back_the_same(
    project: Project, raw: list[dict[str, Any]]
) -> None:
    from core.interchange import export_openai, parse_openai_messages

    store = project.conversations
    conv = store.import_conversation("parts", parse_openai_messages(raw))
    store.append_many(conv.id, parse_openai_messages(raw))  # and through a send's append
    store._loaded.clear()  # what is on disk, not the in-memory copy
    loaded = store.load(conv.id)
    assert loaded.problems == []
    assert [m.to_openai() for m in loaded.messages] == raw + raw
    assert json.loads(export_openai(loaded.messages))["messages"] == raw + raw


# --- crash recovery never breaks opening or sending (issue 8, items 2 and 8) ------------------


@pytest.mark.parametrize("state", [
    {"text": "half an answer", "mode": "turbo"},
    {"text": "half an answer", "model": 5, "continues": 7},
    {"text": "half an answer", "mode": ["chat"], "model": {"name": "m"}},
])
def test_a_sidecar_with_odd_fields_still_becomes_its_entry(project_dir: Path,
                                                           state: dict[str, Any]) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        p.conversations.append(conv.id, user("question"))
        sidecar = p.conversations.root / conv.id / "streaming.partial.json"
        sidecar.write_text(json.dumps(state))  # written by another version, or by hand
    with Project.open(project_dir) as p:
        problems = p.conversations.append(conv.id, user("next"))
        loaded = p.conversations.load(conv.id)
    assert [m.text() for m in loaded.messages] == ["question", "half an answer", "next"]
    assert loaded.messages[1].error is not None and loaded.messages[1].error.type == "app_closed"
    assert any("recovered" in x for x in problems)
    assert not sidecar.exists()


def test_a_read_only_view_refuses_to_touch_a_sidecar(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        sidecar = p.conversations.root / conv.id / "streaming.partial.json"
        sidecar.write_text(json.dumps({"text": "arriving"}))
        with Project.open(project_dir) as second:  # another window: read-only
            with pytest.raises(ReadOnlyError):
                second.conversations.clear_partial(conv.id)
            with pytest.raises(ReadOnlyError):
                second.conversations.write_partial(conv.id, {"text": "other"})
            assert second.conversations.load(conv.id).pending_partial == "arriving"
        assert json.loads(sidecar.read_text()) == {"text": "arriving"}


def test_every_repair_made_while_writing_can_be_shown(project: Project) -> None:
    """A torn line quarantined by a send, or a crashed answer recovered as a turn starts,
    reaches whoever drains the store's problems, once."""
    store = project.conversations
    conv = store.create()
    store.append(conv.id, user("kept"))
    with open(log_path(project, conv.id), "ab") as f:
        f.write(b'{"role": "user", "content": "torn')  # the app died mid-write
    other = store.create()
    (store.root / other.id / "streaming.partial.json").write_text('{"text": "half"}')
    fresh = Project.open  # a new process: nothing is known about either file yet
    project.close()
    with fresh(project.root) as p:
        p.conversations.append(conv.id, user("next"))
        p.conversations.write_partial(other.id, {"text": "new answer"})
        mine = p.conversations.drain_problems(conv.id)
        assert any("unfinished last line" in x for x in mine)
        assert any("kept in messages.jsonl.corrupt-" in x for x in mine)
        assert p.conversations.drain_problems() == [
            "recovered 4 characters of an answer that was arriving when the app closed"]
        assert p.conversations.drain_problems() == []
        assert [m.text() for m in p.conversations.load(other.id).messages] == ["half"]


def test_search_finds_quoted_words_and_refusals(project: Project) -> None:
    store = project.conversations
    a = store.create("Quotes")
    store.append(a.id, user('she said "hello world" and left C:\\temp'))
    b = store.create("Refused")
    store.append(b.id, user("help me"))
    store.append(b.id, ConversationMessage.from_openai(
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot assist"}]}))
    assert store.search('"hello world"') == {a.id}
    assert store.search("C:\\temp") == {a.id}
    assert store.search("cannot assist") == {b.id}


def test_the_list_counts_an_appended_log_from_where_it_stopped_and_a_rewritten_one_afresh(
        project: Project) -> None:
    store = project.conversations
    c = store.create("counted")
    store.append_many(c.id, [user(f"m{i}") for i in range(50)])
    assert store.list()[0].message_count == 50
    store.append(c.id, user("one more"))
    assert store.list()[0].message_count == 51
    # a log that is not the one counted before (shorter, or not ending where it did)
    path = log_path(project, c.id)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:10]))
    assert store.list()[0].message_count == 10
    path.write_bytes(b"".join(lines[:10]) + b'{"torn": ')
    assert store.list()[0].message_count == 10
    path.write_bytes(b"".join(lines[:12]))
    assert store.list()[0].message_count == 12


def test_json_made_in_pieces_is_the_json_of_one_call() -> None:
    # Kept requests are written in pieces (so the window's thread gets the GIL in between);
    # the file must read back exactly as one json.dumps would have written it.
    from core.store.fileio import json_in_pieces

    entries = [{"id": f"e{i}", "reason": "fits — “quoted”", "tokens": i, "stage": None}
               for i in range(1000)]
    value = {"messages": [{"role": "user", "content": "é" * 3}] * 600, "tools": [],
             "report": {"entries": entries, "totals": {"system": 1}, "ok": True, 3: "x"},
             "small": [1, 2.5, None]}
    text = "".join(json_in_pieces(value))
    assert text == json.dumps(value, ensure_ascii=False)
    assert json.loads(text) == json.loads(json.dumps(value))

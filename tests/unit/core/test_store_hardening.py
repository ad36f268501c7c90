"""What the store must never do: lose a message, reorder one, or turn bad input into data."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.interchange import (
    ImportProblem,
    export_markdown,
    export_openai,
    parse_openai_messages,
    read_import_file,
)
from core.model import ConversationMessage, ErrorInfo
from core.store.conversations import PARTIAL_FILE
from core.store.errors import ConversationNotFound, ReadOnlyError
from core.store.project import Project

# --- 1. content parts --------------------------------------------------------------------------

PARTS = [
    {"type": "text", "text": "look at this"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    {"type": "image_url", "image_url": {"url": "https://example.org/a.png", "detail": "high"}},
    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-abc", "filename": "notes.pdf"}},
    {"type": "input_text", "text": "a provider's own kind", "extra": [1, 2]},
]

text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)
part = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(lambda u, d: {"type": "image_url", "image_url": {"url": u, **d}}, text,
              st.sampled_from([{}, {"detail": "low"}, {"detail": "auto"}])),
    st.builds(lambda d: {"type": "input_audio", "input_audio": {"data": d, "format": "mp3"}}, text),
    st.builds(lambda f: {"type": "file", "file": {"file_data": f}}, text),
)
message = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, st.one_of(text.filter(bool), st.lists(part, min_size=1, max_size=4))),
    st.builds(lambda c: {"role": "system", "content": c}, text),
    st.builds(lambda c: {"role": "assistant", "content": c}, text.filter(bool)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(message, min_size=1, max_size=6))
def test_any_message_written_to_the_log_reads_back_the_same(project: Project,
                                                            raw: list[dict[str, Any]]) -> None:
    msgs = parse_openai_messages(raw)
    conv = project.conversations.create()
    project.conversations.append_many(conv.id, msgs)
    project.conversations._loaded.clear()  # read the file, not the in-memory copy
    loaded = project.conversations.load(conv.id)
    assert loaded.problems == [] and loaded.messages == msgs
    assert [m.to_openai() for m in loaded.messages] == [{**m, "content": m["content"]} for m in raw]


def test_every_openai_content_form_survives_import_send_and_export(project: Project) -> None:
    raw = [{"role": "user", "content": PARTS}, {"role": "assistant", "content": "I see."}]
    conv = project.conversations.import_conversation("parts", parse_openai_messages(raw))
    project.conversations.append(conv.id, ConversationMessage(role="user", content="and?"))
    project.conversations._loaded.clear()
    loaded = project.conversations.load(conv.id)
    assert loaded.problems == [] and len(loaded.messages) == 3
    assert json.loads(export_openai(loaded.messages))["messages"][0]["content"] == PARTS


def test_lines_written_before_parts_kept_their_type_still_load(project: Project) -> None:
    conv = project.conversations.create()
    log = project.conversations.root / conv.id / "messages.jsonl"
    log.write_text('{"role":"user","content":[{"text":"old"},{"image_url":{"url":"u"}}],'
                   '"id":"0001","created_at":"2026-01-01T00:00:00Z"}\n')
    loaded = project.conversations.load(conv.id)
    assert loaded.problems == []
    assert loaded.messages[0].to_openai()["content"] == [
        {"type": "text", "text": "old"}, {"type": "image_url", "image_url": {"url": "u"}}]


# --- 2. a recovered answer keeps its place -------------------------------------------------------


def crash_while_answering(project_dir: Path, text: str) -> str:
    """A conversation whose app died while an answer arrived: the sidecar is left behind."""
    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        p.conversations.append(conv.id, ConversationMessage(role="user", content="first question"))
        p.conversations.write_partial(conv.id, {"text": text, "model": "m", "mode": "chat"})
        p.conversations._streaming.clear()  # the process "dies": nothing owns the sidecar
    return conv.id


def test_a_recovered_partial_answer_comes_before_the_next_message(project_dir: Path) -> None:
    conv = crash_while_answering(project_dir, "half an answer")
    with Project.open(project_dir) as p:  # a new process sends without opening the window
        problems = p.conversations.append(conv, ConversationMessage(role="user", content="next"))
        assert any("recovered" in x for x in problems)
        texts = [(m.role, m.kind, m.text()) for m in p.conversations.load(conv).messages]
    assert texts == [("user", "message", "first question"),
                     ("assistant", "error", "half an answer"),
                     ("user", "message", "next")]


def test_clearing_a_partial_while_another_thread_loads_never_duplicates_it(project: Project) -> None:
    conv = project.conversations.create()
    store = project.conversations
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            store.load(conv.id)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(150):
            store.write_partial(conv.id, {"text": f"answer {i}"})
            store.append(conv.id, ConversationMessage(role="assistant", content=f"answer {i}"))
            store.clear_partial(conv.id)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=20)
    kinds = [m.kind for m in store.load(conv.id).messages]
    assert kinds == ["message"] * 150  # no phantom app_closed entry


# --- 3. exports keep every character --------------------------------------------------------------


def test_openai_export_keeps_partial_answers_and_joins_continuations() -> None:
    cut = ConversationMessage(role="assistant", kind="error", content="The answer is for",
                              error=ErrorInfo(type="stream_interrupted", message="cut"))
    rest = ConversationMessage(role="assistant", content="ty-two.", continues=cut.id)
    stopped = ConversationMessage(role="assistant", kind="error", content="I was sto",
                                  error=ErrorInfo(type="stopped", message="stopped"))
    nothing = ConversationMessage(role="assistant", kind="error", content="",
                                  error=ErrorInfo(type="missing_api_key", message="no key"))
    msgs = [ConversationMessage(role="user", content="q"), cut, rest,
            ConversationMessage(role="user", content="q2"), stopped, nothing]
    out = json.loads(export_openai(msgs, "t", pending="arriving when it cra"))["messages"]
    assert out == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "The answer is forty-two."},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "I was sto"},
        {"role": "assistant", "content": "arriving when it cra"},
    ]
    md = export_markdown(msgs, "t", pending="arriving when it cra")
    for piece in ("The answer is for", "ty-two.", "I was sto", "arriving when it cra"):
        assert piece in md


# --- 5. imports are all or nothing ------------------------------------------------------------------


def test_an_import_killed_half_way_leaves_nothing_listed(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        staging = p.conversations.root / ".importing-0123"
        staging.mkdir()
        (staging / "messages.jsonl").write_text('{"role":"user","content":"x","id":"1"}\n')
        assert p.conversations.list() == []  # not shown while (or after) it is written
    with Project.open(project_dir) as p:
        assert not staging.exists()  # removed on the next open
        assert p.conversations.list() == []


# --- 6. metadata ------------------------------------------------------------------------------------------


def test_one_bad_metadata_field_keeps_the_others_and_is_never_persisted_as_a_title(
    project: Project,
) -> None:
    conv = project.conversations.create("My research")
    path = project.conversations.root / conv.id / "conversation.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "mode": "turbo", "id": "somewhere-else"}))
    loaded = project.conversations.load(conv.id)
    assert loaded.meta.title == "My research" and loaded.meta.id == conv.id
    assert any("'mode' is invalid" in p for p in loaded.problems)
    project.conversations.update_meta(conv.id, mode="agent")  # e.g. the next send
    meta = json.loads(path.read_text())
    assert meta["title"] == "My research" and meta["mode"] == "agent" and meta["id"] == conv.id
    assert list(path.parent.glob("conversation.json.bad-*"))  # the original kept beside
    assert [x.name for x in project.conversations.root.iterdir() if x.is_dir()] == [conv.id]


# --- 7. duplicates ------------------------------------------------------------------------------------------


def test_duplicate_lines_load_once_and_are_reported(project: Project) -> None:
    conv = project.conversations.create()
    msg = ConversationMessage(role="user", content="only once")
    project.conversations.append(conv.id, msg)
    log = project.conversations.root / conv.id / "messages.jsonl"
    log.write_bytes(log.read_bytes() * 3)
    loaded = project.conversations.load(conv.id)
    assert [m.text() for m in loaded.messages] == ["only once"]
    assert any("2 lines repeated" in p for p in loaded.problems)


# --- 8. read-only views --------------------------------------------------------------------------------------


def test_a_read_only_view_shows_a_pending_answer_and_never_writes_a_sidecar(project_dir: Path) -> None:
    conv = crash_while_answering(project_dir, "text the user saw")
    with Project.open(project_dir, read_only=True) as p:
        loaded = p.conversations.load(conv)
        assert loaded.pending_partial == "text the user saw"
        assert any("pending" in x for x in loaded.problems)
        with pytest.raises(ReadOnlyError):
            p.conversations.write_partial(conv, {"text": "x"})
        with pytest.raises(ReadOnlyError):
            p.conversations.clear_partial(conv)
    sidecar = project_dir / ".workbench" / "conversations" / conv / PARTIAL_FILE
    assert json.loads(sidecar.read_text())["text"] == "text the user saw"  # untouched


# --- 13. clear errors -----------------------------------------------------------------------------------------


def test_schema_version_that_is_not_a_number_opens_read_only_with_a_reason(project_dir: Path) -> None:
    Project.open(project_dir).close()
    info = project_dir / ".workbench" / "project.json"
    info.write_text(json.dumps({**json.loads(info.read_text()), "schema_version": "two"}))
    with Project.open(project_dir) as p:
        assert p.read_only and "schema_version" in (p.read_only_reason or "")


def test_conversations_folder_that_is_a_file_opens_read_only(project_dir: Path) -> None:
    Project.open(project_dir).close()
    folder = project_dir / ".workbench" / "conversations"
    folder.rmdir()
    folder.write_text("oops")
    with Project.open(project_dir) as p:
        assert p.read_only and "is a file" in (p.read_only_reason or "")
        assert p.conversations.list() == []


def test_ids_are_conversations_of_this_project_only(project: Project, tmp_path: Path) -> None:
    conv = project.conversations.create()
    project.conversations.list()  # writes index.json
    with pytest.raises(ConversationNotFound):
        project.conversations.resolve("index")
    with Project.open(tmp_path / "other") as other:
        elsewhere = other.conversations.create()
        with pytest.raises(ConversationNotFound):
            project.conversations.resolve(str(other.conversations.root / elsewhere.id))
    with pytest.raises(ConversationNotFound):
        project.conversations.resolve(f"../conversations/{conv.id}")


def test_deeply_nested_json_is_refused_in_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "deep.json"
    bad.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ImportProblem, match="nested too deeply"):
        read_import_file(bad)


def test_a_lone_surrogate_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text('{"messages": [{"role": "user", "content": "ok"}, '
                   '{"role": "user", "content": "bad \\ud800 half"}]}')
    with pytest.raises(ImportProblem, match="message 2 .*not valid Unicode"):
        read_import_file(bad)
    good = tmp_path / "pair.json"
    good.write_text('{"messages": [{"role": "user", "content": "emoji \\ud83d\\ude00"}]}')
    assert read_import_file(good)[1][0]["content"] == "emoji 😀"


# --- 19. search -------------------------------------------------------------------------------------------


def test_search_matches_what_users_read_in_any_script(project: Project) -> None:
    store = project.conversations
    a = store.create("Plans")
    store.append(a.id, ConversationMessage(role="user", content="Die STRAẞE ist lang"))
    b = store.create("Other")
    store.append(b.id, ConversationMessage(role="user", content="ΣΊΣΥΦΟΣ pushes a rock"))
    assert store.search("role") == set()  # a JSON key, not text anyone wrote
    assert store.search("content") == set()
    assert store.search("straße") == {a.id}  # ß and ẞ fold together
    assert store.search("σίσυφος") == {b.id}  # Greek final sigma folds too
    assert store.search("plans") == {a.id}


def test_search_keeps_up_with_appends_deletions_and_short_words_through_its_index(
        project: Project) -> None:
    store = project.conversations
    a = store.create("First")
    store.append(a.id, ConversationMessage(role="user", content="the quick brown fox"))
    b = store.create("Second")
    store.append(b.id, ConversationMessage(role="user", content="nothing here"))
    assert store.search("brown") == {a.id}
    index = store.root / a.id / "search.txt"
    assert "the quick brown fox" in index.read_text()  # later searches read this, not the log
    store.append(b.id, ConversationMessage(role="assistant", content="a brown bear appears"))
    assert store.search("brown") == {a.id, b.id}  # only the appended line was read
    assert store.search("ox") == {a.id}  # under three characters: no trigram, still found
    assert store.search('"') == set()
    store.delete(a.id)
    assert store.search("brown") == {b.id}


def test_a_damaged_index_is_rebuilt_and_a_rewritten_log_indexed_again(project: Project) -> None:
    store = project.conversations
    a = store.create("Notes")
    store.append(a.id, ConversationMessage(role="user", content="remember the milk"))
    assert store.search("milk") == {a.id}
    (store.root / a.id / "search.json").write_text("{not json")
    (store.root / a.id / "search.txt").write_bytes(b"\xff\xfe garbage")
    assert store.search("milk") == {a.id} and store.search("garbage") == set()
    # A log rewritten from its start (a restore from backup): what it no longer says is gone.
    log = store.root / a.id / "messages.jsonl"
    line = json.loads(log.read_text().splitlines()[0])
    line["content"] = "remember the bread and the cheese, twice"
    log.write_text(json.dumps(line) + "\n")
    assert store.search("milk") == set() and store.search("cheese") == {a.id}


def test_a_read_only_project_is_searched_without_writing_an_index(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        a = p.conversations.create("Kept")
        p.conversations.append(a.id, ConversationMessage(role="user", content="find me later"))
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.search("me later") == {a.id}
        assert p.conversations.search("later") == {a.id}
        assert not (p.conversations.root / a.id / "search.txt").exists()

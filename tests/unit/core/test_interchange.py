from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.interchange import (
    ImportProblem,
    export_markdown,
    export_openai,
    parse_openai_messages,
    read_import,
    read_import_file,
)
from tests.helpers.trajectories import make_conversation


def write(tmp_path: Path, data: object, name: str = "conv.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_openai_export_gives_back_exactly_what_was_imported(tmp_path: Path) -> None:
    raw = make_conversation(40, seed=3)
    title, loaded = read_import_file(write(tmp_path, {"messages": raw, "title": "T"}))
    out = json.loads(export_openai(parse_openai_messages(loaded), title))
    assert out == {"title": "T", "messages": raw}


def test_a_bare_list_is_accepted_and_titled_after_the_file(tmp_path: Path) -> None:
    title, loaded = read_import_file(write(tmp_path, [{"role": "user", "content": "hi"}], "chat-7.json"))
    assert title == "chat-7" and len(parse_openai_messages(loaded)) == 1


def test_not_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"messages": [\n  {"role": "user",, }]}')
    with pytest.raises(ImportProblem, match=r"not valid JSON \(line 2"):
        read_import_file(path)


def test_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"messages": ["\xff"]}')
    with pytest.raises(ImportProblem, match="not UTF-8"):
        read_import_file(path)


def test_tool_result_without_its_call_is_refused_with_its_position() -> None:
    raw = [{"role": "user", "content": "hi"},
           {"role": "tool", "tool_call_id": "call_9", "content": "result"}]
    with pytest.raises(ImportProblem, match="message 2 is a tool result for call 'call_9'"):
        parse_openai_messages(raw)


def test_invalid_message_is_named(tmp_path: Path) -> None:
    with pytest.raises(ImportProblem, match="message 2: .*content or tool_calls"):
        parse_openai_messages([{"role": "user", "content": "a"}, {"role": "assistant"}])


def test_wrong_shape_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ImportProblem, match='no "messages" list'):
        read_import_file(write(tmp_path, {"conversation": []}))
    with pytest.raises(ImportProblem, match="no messages"):
        parse_openai_messages([])


def test_file_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = write(tmp_path, [{"role": "user", "content": "x" * 5000}])
    with pytest.raises(ImportProblem, match="larger than the 1,000 bytes limit"):
        read_import_file(path, max_bytes=1000)


def test_markdown_export_shows_tool_calls_and_errors_readably() -> None:
    msgs = parse_openai_messages(make_conversation(3, seed=1))
    md = export_markdown(msgs, "Demo")
    assert md.startswith("# Demo") and "## User" in md and "**Tool call**" in md


def test_every_export_keeps_every_character_the_user_saw() -> None:
    import json as _json

    from core.interchange import export_jsonl, export_markdown, export_openai
    from core.model import ConversationMessage, ErrorInfo, ToolCall

    refusal = ConversationMessage.from_openai(
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I won't do that"}]})
    picture = ConversationMessage.from_openai({"role": "user", "content": [
        {"type": "text", "text": "what is"},
        {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}]})
    cut_call = ConversationMessage(
        role="assistant", kind="error", content="",
        tool_calls=[ToolCall.model_validate(
            {"id": "c1", "function": {"name": "read_file", "arguments": '{"pa'}})],
        error=ErrorInfo(type="stream_interrupted", message="cut"))
    msgs = [picture, refusal, cut_call]
    md = export_markdown(msgs, "t", pending="arriving text")
    for piece in ("what is", "https://example.org/cat.png", "I won't do that", "read_file",
                  '{"pa', "arriving text"):
        assert piece in md
    openai = _json.loads(export_openai(msgs, "t"))["messages"]
    assert "read_file" in _json.dumps(openai) and '{\\"pa' in _json.dumps(openai)
    lines = export_jsonl(msgs, pending="arriving text").splitlines()
    assert len(lines) == 4 and "arriving text" in lines[-1]
    last = ConversationMessage.model_validate_json(lines[-1])
    assert last.error is not None and last.error.type == "app_closed"


def _call(cid: str, name: str = "read_file") -> dict[str, object]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_calls_a_file_leaves_without_results_are_answered_before_the_next_message(
        tmp_path: Path) -> None:
    """A crash's export with a message added, or another tool's export: the calls have no
    result and the conversation goes on. The imported log is protocol-complete: each call is
    answered as aborted right after its batch, and nothing of the file is lost."""
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b", "ls")]},
        {"role": "tool", "tool_call_id": "a", "content": "A's result"},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "done"},
    ]}))
    _title, entries = read_import(path)
    assert [(m.role, m.tool_call_id, m.status) for m in entries] == [
        ("user", None, None), ("assistant", None, None), ("tool", "a", None),
        ("tool", "b", "aborted"), ("user", None, None), ("assistant", None, None)]
    added = entries[3]
    assert added.tool_name == "ls" and "no result was recorded" in added.text()
    assert entries[2].text() == "A's result" and entries[4].text() == "and then?"


def test_a_result_that_comes_after_a_later_message_joins_its_call(tmp_path: Path) -> None:
    path = tmp_path / "late.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
        {"role": "user", "content": "meanwhile"},
        {"role": "tool", "tool_call_id": "a", "content": "A's result"},
    ]))
    _title, entries = read_import(path)
    assert [(m.role, m.text()) for m in entries] == [
        ("user", "look"), ("assistant", ""), ("tool", "A's result"), ("user", "meanwhile")]


def test_calls_the_file_ends_with_are_left_for_the_engine_to_close(tmp_path: Path) -> None:
    """The last batch may still wait, as after a crash: the engine answers it when the
    conversation is next used (it knows whether a command had started)."""
    path = tmp_path / "crash.json"
    path.write_text(json.dumps([{"role": "user", "content": "look"},
                                {"role": "assistant", "content": None,
                                 "tool_calls": [_call("a")]}]))
    _title, entries = read_import(path)
    assert [m.role for m in entries] == ["user", "assistant"]

from __future__ import annotations

from typing import Any

import pytest

from core.model import ConversationMessage, InvalidMessage, TextPart, new_id


def test_tool_message_without_call_id_is_refused() -> None:
    with pytest.raises(InvalidMessage, match="tool_call_id"):
        ConversationMessage.from_openai({"role": "tool", "content": "42"})


def test_assistant_needs_content_or_tool_calls() -> None:
    with pytest.raises(InvalidMessage, match="content or tool_calls"):
        ConversationMessage.from_openai({"role": "assistant", "content": None})


def test_unknown_role_is_refused_with_its_name() -> None:
    with pytest.raises(InvalidMessage, match="role"):
        ConversationMessage.from_openai({"role": "wizard", "content": "hi"})


def test_tool_call_arguments_must_be_a_json_string() -> None:
    with pytest.raises(InvalidMessage, match="JSON string"):
        ConversationMessage.from_openai({
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": {"a": 1}}}],
        })


def test_to_openai_emits_only_protocol_fields() -> None:
    msg = ConversationMessage.from_openai(
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]},
        model="gpt-4o", usage={"prompt_tokens": 3}, pinned=True,
    )
    assert msg.to_openai() == {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}],
    }


def test_list_content_parts_survive_the_round_trip() -> None:
    raw = {"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]}
    msg = ConversationMessage.from_openai(raw)
    assert isinstance(msg.content, list) and isinstance(msg.content[0], TextPart)
    assert msg.text() == "what is this?"
    assert msg.to_openai() == raw


def test_error_entries_may_be_empty_but_need_details() -> None:
    with pytest.raises(ValueError, match="error details"):
        ConversationMessage(role="assistant", kind="error", content="")


def test_ids_sort_in_creation_order_and_are_unique() -> None:
    ids = [new_id() for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


# Every content form OpenAI or litellm accepts, as a user would import it.
CONTENT_FORMS = [
    {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}},
    {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
    {"type": "image_url", "image_url": "https://example.org/plain-string-form.png"},  # litellm
    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
    {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}},
    {"type": "input_text", "text": "a provider's own kind", "extra": {"k": [1, None]}},
]


@pytest.mark.parametrize("part", CONTENT_FORMS, ids=lambda p: str(p["type"]))
def test_every_content_form_converts_back_exactly(part: dict[str, Any]) -> None:
    raw = {"role": "user", "content": [part]}
    msg = ConversationMessage.from_openai(raw)
    assert msg.to_openai() == raw
    again = ConversationMessage.model_validate_json(msg.model_dump_json(exclude_defaults=True))
    assert again.to_openai() == raw


def test_a_refusal_part_converts_back_exactly() -> None:
    raw = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help."}]}
    msg = ConversationMessage.from_openai(raw)
    again = ConversationMessage.model_validate_json(msg.model_dump_json(exclude_defaults=True))
    assert again.to_openai() == raw


def test_the_part_kinds_we_send_are_the_ones_litellm_lets_through() -> None:
    from litellm.types.llms.openai import ValidUserMessageContentTypes

    from core.model import SENDABLE_PART_KINDS
    assert set(ValidUserMessageContentTypes) | {"refusal"} == SENDABLE_PART_KINDS

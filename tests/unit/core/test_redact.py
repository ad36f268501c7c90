"""Key-shaped strings and the keys in use never survive into text we store or print."""

from __future__ import annotations

import pytest

from core.redact import MARK, redact


@pytest.mark.parametrize("text, secret", [
    ("Incorrect API key provided: sk-proj-abcdefghijklmnop1234.", "sk-proj-abcdefghijklmnop1234"),
    ("x-api-key: sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv"),
    ("key=AIzaSyA1234567890abcdefghijklmnopqr", "AIzaSyA1234567890abcdefghijklmnopqr"),
    ("Authorization: Bearer abc.def.ghi-jkl123", "abc.def.ghi-jkl123"),
    # long hex or base64-ish secrets after the word "key", in the shapes dumps use
    ("x-api-key: 0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ('{"api_key": "AbC1234567890xyzQWERTYuiop"}', "AbC1234567890xyzQWERTYuiop"),
    ("Invalid API key: ABCD1234efgh5678IJKL9012", "ABCD1234efgh5678IJKL9012"),
    ("the key 3f8a9c2e1b4d7f6a0e5c8b9d2a1f4e7c is revoked", "3f8a9c2e1b4d7f6a0e5c8b9d2a1f4e7c"),
    ("secret: dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ==", "dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ=="),
    # upper case, and deep in a long output (most text is passed by a quick word check)
    ("line\n" * 2000 + "SECRET: dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ==", "dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ=="),
    ("GET /v1?API_KEY=ABCDEFGHIJKL123 HTTP/1.1", "ABCDEFGHIJKL123"),
    ("\u212aey: 0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
])
def test_key_shaped_strings_are_redacted_and_the_words_around_them_kept(text: str,
                                                                        secret: str) -> None:
    out = redact(text)
    assert secret not in out and MARK in out
    assert out.replace(MARK, secret) == text  # nothing else changed


@pytest.mark.parametrize("text", [
    "The API key you gave is invalid; check the keyboard settings.",
    "The monkey provided: bananas.",
    "maximum context length is 8192 tokens; your messages resulted in 9000 tokens",
    "key: internationalization_considerations",  # a long word, not a secret
    # a key's prefix inside a word (found in a real session's file: "task-specific")
    "// Package checkpoint: task-specific and disk-specific storage, shelf_configuration_values",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_the_keys_in_use_are_redacted_whatever_their_shape() -> None:
    text = "server said: token local-server-secret-7f3a9 unknown"
    redacted = redact(text, ["local-server-secret-7f3a9", None, ""])
    assert redacted == f"server said: token {MARK} unknown"
    assert redact("ok", ["ab"]) == "ok"  # too short to be a secret: never eats words

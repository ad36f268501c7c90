"""The keys the process knows (core.redact.remember), redacted by every redact(); JSON values
and a stream printed piece by piece."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.redact import MARK, StreamRedactor, known, redact, redact_value, remember
from core.store.fileio import atomic_write_json, atomic_write_json_in_pieces, atomic_write_text

SHAPED = "sk-proj-Q7f3Lm9Xa2Vd8Kp4Rt6Wz1Bc5Ng0"
IN_USE = "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SERVICE_TOKEN", IN_USE)
    remember(["short12", "Bearer abc def", "ab", "k9x2z"])


def test_a_remembered_key_is_redacted_by_every_redact(keys: None) -> None:
    assert redact("token=short12, again: short12.") == f"token={MARK}, again: {MARK}."
    assert redact("header Bearer abc def sent") == f"header {MARK} sent"
    assert redact(f"env {IN_USE}") == f"env {MARK}"


def test_a_short_key_is_redacted_as_a_word_never_inside_another(keys: None) -> None:
    assert redact("k9x2z, not ak9x2z or k9x2z_1") == f"{MARK}, not ak9x2z or k9x2z_1"
    assert redact("ab is two letters: a flag, never a key") == \
        "ab is two letters: a flag, never a key"


def test_json_values_are_redacted_and_stay_json(keys: None, tmp_path: Path) -> None:
    value = {"drafts": {"c": f"key {SHAPED}"}, "n": 3, "list": ["short12", None, True],
             "error": f"Incorrect API key provided: {IN_USE}"}
    assert redact_value(value) == {"drafts": {"c": f"key {MARK}"}, "n": 3,
                                   "list": [MARK, None, True],
                                   "error": f"Incorrect API key provided: {MARK}"}
    clean = {"a": ["b", 1]}
    assert redact_value(clean) is clean  # nothing to change: the same object
    atomic_write_json(tmp_path / "a.json", value)
    atomic_write_json_in_pieces(tmp_path / "b.json", {"messages": [value] * 300})
    atomic_write_text(tmp_path / "c.md", f"# {SHAPED}\n")
    for name in ("a.json", "b.json", "c.md"):
        text = (tmp_path / name).read_text()
        assert SHAPED not in text and IN_USE not in text and "short12" not in text
    assert json.loads((tmp_path / "b.json").read_text())["messages"][299]["n"] == 3


def test_a_key_split_across_any_two_pieces_is_never_printed(keys: None) -> None:
    text = (f"The key is {SHAPED} and Bearer abc def, the token {IN_USE}; "
            "Incorrect API key provided: abcdef123456. Done.\n")
    whole = redact(text)
    for cut in range(1, len(text)):
        shown = StreamRedactor()
        printed = shown.feed(text[:cut]) + shown.feed(text[cut:]) + shown.end()
        assert printed == whole, cut


def test_a_stream_is_printed_as_it_comes_but_for_its_last_words(keys: None) -> None:
    shown = StreamRedactor()
    words = [f"word{n} " for n in range(40)]
    printed = "".join(shown.feed(w) for w in words)
    held = max([len(k) for k in known()] + [0]) + 40  # and as long as the longest key known
    assert printed.startswith("word0 word1 ") and len(printed) > len("".join(words)) - held
    assert printed + shown.end() == "".join(words)
    long_run = "x" * 10_000  # no space at all: printed but for its end
    assert len(shown.feed(long_run)) > 5_000


def test_a_long_run_without_spaces_is_cut_where_no_key_is(keys: None) -> None:
    text = "x," * 3000 + f'"api_key": "{IN_USE}9999x"' + "y," * 40
    whole = redact(text)
    assert IN_USE not in whole
    for cut in range(len(text) - 200, len(text)):
        shown = StreamRedactor()
        printed = shown.feed(text[:cut]) + shown.feed(text[cut:]) + shown.end()
        assert printed == whole, cut


def test_a_key_given_to_the_keyring_is_known_even_where_no_keyring_works() -> None:
    from core.settings import keyring_set

    typed = "Wm3Qp8Zr5Tx2Lk9Vb4Ny"  # shaped like nothing
    assert keyring_set("openai", typed) is False  # the tests' keyring: none works
    assert redact(f"it said {typed}, failed") == f"it said {MARK}, failed"


def test_a_setting_is_not_taken_for_a_key() -> None:
    remember(["true", "8080", "Off"])
    assert redact("true: it listens on 8080, logging off") == \
        "true: it listens on 8080, logging off"


def test_a_variable_naming_a_place_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/home/someone/.cache/tiktoken-files")
    assert redact("cached in /home/someone/.cache/tiktoken-files") == \
        "cached in /home/someone/.cache/tiktoken-files"


def test_the_environment_is_followed_as_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the environment's secrets were is kept between redactions: a change is still seen
    monkeypatch.setenv("ACME_SERVICE_TOKEN", IN_USE)
    assert IN_USE in known() and redact(f"env {IN_USE}") == f"env {MARK}"
    later = "Hm4Kd8Wq2Zr6Tx9Lp3Vn7Bc"
    monkeypatch.setenv("ACME_SERVICE_TOKEN", later)
    assert redact(f"env {later}, {IN_USE}") == f"env {MARK}, {IN_USE}"
    monkeypatch.delenv("ACME_SERVICE_TOKEN")
    assert later not in known()

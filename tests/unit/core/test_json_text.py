"""The fast JSON reader the digest uses for tool-call arguments reads what json.loads reads."""

from __future__ import annotations

import json

import pytest

from core.json_text import loads

ARGUMENTS = [
    '{"path": "src/app.py"}',
    '{"command": ["bash", "-lc", "pytest -q"], "timeout": 30}',
    '{"path": "src/caf\\u00e9.py", "content": "line\\nnext\\ttab \\"quoted\\""}',
    '{"path": "bad\\ud800name.py"}',  # a lone surrogate a model wrote: json takes it
    '{"n": 12345678901234567890123, "x": 1.5e300, "f": NaN}',
    '[1, {"a": null, "b": true}]',
    '"just a string"',
    '{"a": 1, "a": 2}',  # a repeated key: the last one wins, as in json
]


@pytest.mark.parametrize("text", ARGUMENTS)
def test_it_reads_what_json_reads(text: str) -> None:
    expected, got = json.loads(text), loads(text)
    assert json.dumps(got) == json.dumps(expected)


@pytest.mark.parametrize("text", ["", "{bad", '{"a": 1}{', "{'single': 1}"])
def test_what_is_not_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)

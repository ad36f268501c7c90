"""What the request keeps of a failure in every dialect of shell and tool: the command, its kind
and the line that names the cause, whether the failure is in the digest, in a shortened output
or sent whole (sessions made by tests/helpers/dialects.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.context.budget import Budget
from core.context.builder import BuiltRequest, build_request
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from tests.helpers.dialects import DIALECTS, dialect_session

COUNTER = TokenCounter("o200k_base")


def imported(raw: list[dict[str, Any]]) -> list[ConversationMessage]:
    return [COUNTER.with_count(ConversationMessage.from_openai(m)) for m in raw]


def build(history: list[ConversationMessage], share: float) -> BuiltRequest:
    def at(budget: int) -> BuiltRequest:
        return build_request(history, "agent", model="gpt-4o",
                             budget=Budget(budget, 0, 0, "override"), counter=COUNTER,
                             composer=PromptComposer(), compact=True)
    return at(int(at(10**8).report.used * share))


def digest_line(history: list[ConversationMessage], command: str, share: float = 0.1) -> str:
    built = build(history, share)
    digest: str = next(m["content"] for m in built.messages
                       if str(m.get("content")).startswith("[Context digest"))
    return next(x for x in digest.splitlines() if x.startswith(f"- {command} → "))


def sent_text(built: BuiltRequest) -> str:
    parts = []
    for m in built.messages:
        parts.append(str(m.get("content") or ""))
        parts += [c["function"]["arguments"] for c in m.get("tool_calls") or ()]
    return " ".join(" ".join(parts).split())


def test_a_zsh_session_on_macos_names_the_missing_command() -> None:
    history = imported(dialect_session("zsh on macOS", seed=1))
    line = digest_line(history, "staticcheck ./...")
    assert line.startswith("- staticcheck ./... → failed (exit 127, shell): "
                           "(eval):1: command not found: staticcheck → then the model: ")
    line = digest_line(history, "python -m pytest tests")
    assert "failed (exit 127, shell): zsh:1: command not found: python" in line


def test_a_progress_bar_is_read_to_its_last_segment_and_colours_are_dropped() -> None:
    history = imported(dialect_session("progress bars", seed=1))
    line = digest_line(history, "git rebase -i origin/main")
    assert ("failed (git): error: Unable to create '/Users/alex/cli/.git/index.lock': File "
            "exists.") in line
    assert "Rebasing" not in line
    line = digest_line(history, "cargo build --release")
    assert "error[E0425]: cannot find value `cfg` in this scope" in line
    assert "\x1b" not in line and "Building [" not in line


def test_a_cause_nested_in_a_runners_report_is_named_beside_what_failed() -> None:
    history = imported(dialect_session("nested causes", seed=1))
    line = digest_line(history, "go test -v ./cmd/entire/cli/strategy/...")
    assert "failed (test): --- FAIL: TestRebaseKeepsCheckpoints (0.04s) … Output: fatal: " \
           "invalid upstream 'main'" in line
    line = digest_line(history, "pytest -q tests/test_sessions.py")
    assert "… E FileNotFoundError: [Errno 2] No such file or directory: " \
           "'tests/fixtures/session.json'" in line
    line = digest_line(history, "cargo check --workspace")
    assert "Caused by: No such file or directory (os error 2)" in line


def test_windows_shells_name_the_command_they_do_not_know() -> None:
    history = imported(dialect_session("PowerShell, cmd, fish", seed=1))
    assert "(shell): 'make' is not recognized as an internal or external command," in \
        digest_line(history, "make test")
    assert "(shell): pytest: The term 'pytest' is not recognized" in \
        digest_line(history, "pytest -q")
    assert "(shell): fish: Unknown command: rg" in digest_line(history, "rg TODO src")


def test_a_failed_output_shortened_to_a_reference_still_names_its_cause() -> None:
    history = imported(dialect_session("nested causes", seed=0))
    go = next(m for m in history if m.tool_calls and "TestPush" in m.tool_calls[0].function.arguments)
    assert go.tool_calls is not None
    for share in (0.5, 0.35, 0.25, 0.2):
        built = build(history, share)
        sent = next((m for m in built.messages if m.get("tool_call_id") == go.tool_calls[0].id),
                    None)
        if sent is not None and str(sent["content"]).startswith("[tool output"):
            assert "Output: error: src refspec feature does not match any" in sent["content"]
            return
    pytest.fail("the output was never shortened to a reference")


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("share", [0.1, 0.25])
def test_every_failure_of_every_dialect_is_named_with_its_cause(dialect: str,
                                                                share: float) -> None:
    history = imported(dialect_session(dialect, seed=2, work=50))
    text = sent_text(build(history, share))
    for command, _, cause, _ in DIALECTS[dialect]:
        assert json.dumps(command)[1:-1] in text or command in text
        assert cause in text, f"{command}: {cause}"


def test_the_scorer_reads_a_progress_bars_output_as_the_terminal_shows_it() -> None:
    history = imported(dialect_session("progress bars", seed=1))
    call = next(m for m in history
                if m.tool_calls and "cargo build" in m.tool_calls[0].function.arguments)
    assert call.tool_calls is not None
    result = next(m for m in history if m.tool_call_id == call.tool_calls[0].id)
    entry = next(e for e in build(history, 0.1).report.entries if e.id == result.id)
    assert entry.decision == "digested"
    assert "errors 1" in entry.reason  # the error behind the frames, not the frames' numbers

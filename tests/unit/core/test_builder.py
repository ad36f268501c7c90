"""build_request: the prefix per mode, trimming to the budget, the report, protocol validity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.context.budget import Budget, resolve_budget
from core.context.builder import BudgetError, BuiltRequest, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, ErrorInfo, Mode
from core.workflows.state import RunContext
from tests.helpers.trajectories import make_conversation

COUNTER = TokenCounter("o200k_base")


def log(raw: list[dict[str, Any]]) -> list[ConversationMessage]:
    return [COUNTER.with_count(ConversationMessage.from_openai(m)) for m in raw]


def build(history: list[ConversationMessage], budget: int, mode: Mode = "chat",
          composer: PromptComposer | None = None, run: RunContext | None = None,
          compact: bool = False) -> BuiltRequest:
    # Compaction off: these tests are about the last-resort trimming (test_compaction.py has
    # the stages in front of it).
    return build_request(history, mode, model="gpt-4o", budget=Budget(budget, 0, 0, "override"),
                         counter=COUNTER, composer=composer or PromptComposer(), run_context=run,
                         compact=compact)


def test_everything_is_sent_when_it_fits() -> None:
    history = log(make_conversation(5, seed=1)[1:])
    built = build(history, 100_000)
    assert built.messages[0]["role"] == "system"
    assert built.messages[1:] == [m.to_openai() for m in history]
    assert {e.decision for e in built.report.entries} == {"kept"}
    assert built.report.used <= built.report.usable


def test_each_mode_has_its_own_prefix_and_history_is_unchanged() -> None:
    history = log([{"role": "user", "content": "hello"}])
    chat = build(history, 10_000, "chat").messages
    agent = build(history, 10_000, "agent").messages
    run = build(history, 10_000, "run").messages
    assert "Mode: chat" in chat[0]["content"] and "engineer" not in chat[0]["content"]
    assert "engineer" in agent[0]["content"] and "Use tools" in agent[0]["content"]
    assert "No workflow is active" in run[0]["content"]
    assert chat[1:] == agent[1:] == run[1:]


def test_run_mode_carries_the_active_step_or_only_the_post_run_protocol() -> None:
    history = log([{"role": "user", "content": "go"}])
    step = RunContext("Release", step_number=2, step_count=3, step_id="notes",
                      step_title="Write notes", brief="Summarize the changes",
                      done_when="notes.md exists")
    text = build(history, 10_000, "run", run=step).messages[0]["content"]
    assert "step 2 of 3: Write notes (id notes)" in text and "notes.md exists" in text
    done = RunContext("Release", complete=True)
    text = build(history, 10_000, "run", run=done).messages[0]["content"]
    assert "is complete" in text and "NODE_BRIEF" not in text and "active step" not in text


def test_a_project_can_override_a_template(tmp_path: Path) -> None:
    (tmp_path / "base_chat.md").write_text("You answer only in haiku.")
    history = log([{"role": "user", "content": "hi"}])
    built = build(history, 10_000, composer=PromptComposer(tmp_path))
    assert built.messages[0]["content"].startswith("You answer only in haiku.")


def test_over_budget_drops_old_rounds_first_and_keeps_tool_groups_whole() -> None:
    raw = make_conversation(40, seed=5, tool_output_chars=800)
    history = log(raw)
    full = build(history, 10**7).report.used
    built = build(history, full // 4)
    assert built.report.used <= full // 4
    assert protocol_errors(built.messages[1:]) == []
    assert built.messages[-1]["content"] == history[-1].to_openai()["content"]
    dropped = [e for e in built.report.entries if e.decision == "dropped"]
    kept_ids = [e.id for e in built.report.entries if e.decision == "kept"]
    assert dropped and "older round" in dropped[1].reason
    # newest entries survive, oldest go
    ids = [m.id for m in history]
    assert ids[-1] in kept_ids and ids[1] not in kept_ids


def test_the_latest_user_message_and_pinned_entries_survive() -> None:
    raw = make_conversation(20, seed=8)
    history = log(raw)
    history[2] = history[2].model_copy(update={"pinned": True})
    full = build(history, 10**7).report.used
    built = build(history, full // 5)
    kept = {e.id for e in built.report.entries if e.decision == "kept"}
    assert history[2].id in kept
    last_user = [m for m in history if m.role == "user"][-1]
    assert last_user.id in kept


def test_a_budget_smaller_than_the_minimum_says_how_many_tokens_are_needed() -> None:
    history = log([{"role": "user", "content": "word " * 500}])
    with pytest.raises(BudgetError, match=r"needs at least [\d,]+ tokens"):
        build(history, 100)


def test_error_entries_are_sent_with_a_neutral_marker_and_system_entries_are_not() -> None:
    history = log([{"role": "system", "content": "old imported prompt"},
                   {"role": "user", "content": "hi"}])
    history.append(ConversationMessage(role="assistant", kind="error", content="Half an ans",
                                       error=ErrorInfo(type="network", message="Lost connection")))
    built = build(history, 10_000)
    assert "old imported prompt" not in str(built.messages)
    assert built.messages[-1]["content"].startswith("Half an ans")
    assert built.messages[-1]["content"] == "Half an ans\n\n[unfinished: interrupted here]"
    reasons = [e.reason for e in built.report.entries if e.decision == "excluded"]
    assert any("old system entry" in r for r in reasons)


def test_unknown_models_get_a_conservative_window_and_say_so() -> None:
    b = resolve_budget("mystery/model-x", 4096)
    assert b.source == "default" and b.window == 8192 and "assuming" in (b.note or "")
    known = resolve_budget("gpt-4o", 4096)
    assert known.source == "litellm" and known.window >= 100_000
    assert known.usable == known.window - 4096 - known.safety


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.integers(1, 25), seed=st.integers(0, 10_000), fraction=st.floats(0.05, 1.2))
def test_random_logs_always_give_a_valid_request_within_budget(
    rounds: int, seed: int, fraction: float
) -> None:
    history = log(make_conversation(rounds, seed=seed, tool_output_chars=300))
    full = build(history, 10**7).report.used
    budget = max(1, int(full * fraction))
    try:
        built = build(history, budget)
    except BudgetError as e:
        assert e.needed > budget
        return
    assert built.report.used <= budget
    assert protocol_errors(built.messages[1:]) == []


def test_an_incremental_build_equals_a_build_from_scratch() -> None:
    from core.context.builder import BuildCache

    history = log(make_conversation(30, seed=12, tool_output_chars=500))
    cache = BuildCache()
    budget = build(history, 10**7).report.used // 3
    for n in (10, 11, 25, len(history)):  # the log grows between builds
        part = history[:n]
        fresh = build_request(part, "chat", model="gpt-4o", budget=Budget(budget, 0, 0, "x"),
                              counter=COUNTER, composer=PromptComposer())
        cached = build_request(part, "chat", model="gpt-4o", budget=Budget(budget, 0, 0, "x"),
                               counter=COUNTER, composer=PromptComposer(), cache=cache)
        assert cached.messages == fresh.messages
        assert [e.decision for e in cached.report.entries] == \
            [e.decision for e in fresh.report.entries]
    changed = [*history[:-1], history[-1].model_copy(update={"pinned": True})]
    assert build_request(changed, "chat", model="gpt-4o", budget=Budget(budget, 0, 0, "x"),
                         counter=COUNTER, composer=PromptComposer(), cache=cache).messages


def test_compression_stages_run_past_the_trigger_and_are_reported() -> None:
    from core.context.stages import CompressionStage, StageResult

    class ShortenTools(CompressionStage):
        name = "shorten-tools"

        def compress(self, entries: list[ConversationMessage], target_tokens: int,
                     counter: TokenCounter) -> StageResult:
            out, decisions = [], []
            for m in entries:
                if m.role == "tool":
                    m = m.model_copy(update={"content": m.text()[:20], "token_counts": {}})
                    decisions.append((m.id, "compacted", "preview of a long output"))
                out.append(m)
            return StageResult(out, decisions)

    history = log(make_conversation(10, seed=2, tool_output_chars=2000))
    full = build(history, 10**7).report.used
    built = build_request(history, "chat", model="gpt-4o", budget=Budget(full, 0, 0, "x"),
                          counter=COUNTER, composer=PromptComposer(), stages=[ShortenTools()])
    assert any(s["name"] == "shorten-tools" and s["changed"] for s in built.report.stages)
    assert built.report.used < full // 2
    assert protocol_errors(built.messages[1:]) == []
    calm = build_request(history, "chat", model="gpt-4o", budget=Budget(full * 10, 0, 0, "x"),
                         counter=COUNTER, composer=PromptComposer(), stages=[ShortenTools()])
    assert not any(s["name"] == "shorten-tools" for s in calm.report.stages)  # under the trigger


def test_a_stage_that_shortens_copies_saves_tokens_and_keeps_excluded_entries_reported() -> None:
    from core.context.stages import CompressionStage, StageResult

    class Preview(CompressionStage):  # does not reset the copies' cached counts
        name = "preview"

        def compress(self, entries: list[ConversationMessage], target_tokens: int,
                     counter: TokenCounter) -> StageResult:
            out, decisions = [], []
            for m in entries:
                if m.role == "tool":
                    m = m.model_copy(update={"content": m.text()[:20]})
                    decisions.append((m.id, "previewed", "head of a long output"))
                out.append(m)
            return StageResult(out, decisions)

    history = log([{"role": "system", "content": "an old imported prompt"},
                   *make_conversation(10, seed=2, tool_output_chars=2000)])
    history = [COUNTER.with_count(m) for m in history]  # counts cached, as in the log
    full = build(history, 10**7).report.used
    built = build_request(history, "chat", model="gpt-4o", budget=Budget(full, 0, 0, "x"),
                          counter=COUNTER, composer=PromptComposer(), stages=[Preview()])
    assert built.report.used < full // 2  # the shortened copies really cost less
    decisions = {e.decision for e in built.report.entries}
    assert "previewed" in decisions and "excluded" in decisions  # the old system entry stays
    previewed = [e for e in built.report.entries if e.decision == "previewed"]
    assert all(e.stage == "preview" and e.tokens < (e.tokens_before or 0) for e in previewed)


def test_a_summary_replaces_what_it_covers() -> None:
    history = log(make_conversation(6, seed=4, tool_output_chars=300))
    covered = [m.id for m in history[1:6]]
    summary = ConversationMessage(role="system", kind="summary", covers=covered,
                                  content="Summary of the first rounds: files a, b changed.")
    built = build([*history, summary], 10**6)
    sent = str(built.messages)
    assert "Summary of the first rounds" in sent
    by_id = {e.id: e for e in built.report.entries}
    assert all(by_id[i].decision == "summarized" for i in covered)
    assert all(history[k].text() not in sent for k in range(1, 6) if history[k].text())


def test_every_figure_shown_is_the_one_calibrated_count() -> None:
    """A provider that counts 0.6 of our tokens: the meter's tooltip, the Inspector's header and
    bar and `workbench context` all show the calibrated figure against the usable budget (no
    uncalibrated count beside a calibrated percentage)."""
    from core.context.report_text import budget_parts, cli_lines, inspector_header, tooltip_lines

    history = log(make_conversation(12, seed=3)[1:])
    budget = Budget(20_000, 2_000, 200, "override", calibration=0.6)
    built = build_request(history, "chat", model="gpt-4o", budget=budget, counter=COUNTER,
                          composer=PromptComposer())
    r = built.report
    shown = r.provider_estimate
    assert shown == round(r.used * 0.6) and shown != r.used
    figure = f"{shown:,} of {r.usable:,}"
    assert inspector_header(r).startswith(figure)
    assert tooltip_lines(r, 0)[0].startswith(figure)
    used_line = next(x for x in cli_lines(r, {}, len(built.messages)) if x.startswith("used"))
    assert used_line.startswith(f"used {figure}")
    parts = dict(budget_parts(r))
    assert abs(sum(parts[k] for k in ("system", "tools", "summary", "history")) - shown) <= 4

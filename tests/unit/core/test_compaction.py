"""The no-LLM compaction stages inside build_request: previews, references, key-message
selection and the digest, on an agent session the test makes itself."""

from __future__ import annotations

import json
import re
from typing import Any

from core.context.budget import Budget
from core.context.builder import ACK, BuildCache, BuiltRequest, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.context.report import EntryDecision
from core.context.stages import TRIGGER
from core.context.view import to_json as view_json
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, ToolCall
from tests.helpers.trajectories import make_agent_session

COUNTER = TokenCounter("o200k_base")


def session(rounds: int = 30, seed: int = 1) -> list[ConversationMessage]:
    return [COUNTER.with_count(m) for m in make_agent_session(rounds, seed)]


def build(history: list[ConversationMessage], budget: int, cache: BuildCache | None = None,
          compact: bool = True) -> BuiltRequest:
    return build_request(history, "agent", model="gpt-4o",
                         budget=Budget(budget, 0, 0, "override"), counter=COUNTER,
                         composer=PromptComposer(), cache=cache, compact=compact)


def full_size(history: list[ConversationMessage]) -> int:
    return build(history, 10**8).report.used


def decisions(built: BuiltRequest) -> dict[str, EntryDecision]:
    return {e.id: e for e in built.report.entries}


def test_below_the_trigger_nothing_is_compacted() -> None:
    history = session(6)
    full = full_size(history)
    built = build(history, int(full / 0.79))
    assert {e.decision for e in built.report.entries} == {"kept"}
    assert [s["name"] for s in built.report.stages if s["name"] == "tool outputs"] == []


def test_old_tool_outputs_become_previews_that_name_their_ref_and_recent_ones_stay_whole() -> None:
    history = session(20)
    full = full_size(history)
    built = build(history, int(full / 0.95))  # over the 80% trigger: compact toward 50%
    by_id = decisions(built)
    previewed = [e for e in built.report.entries if e.decision == "previewed"]
    assert previewed, "old tool outputs should be previewed"
    first = next(m for m in history if m.role == "tool" and by_id[m.id].decision == "previewed")
    sent = next(m for m in built.messages if m.get("tool_call_id") == first.tool_call_id)
    assert f'read_tool_result(ref="{first.tool_call_id}")' in sent["content"]
    assert sent["content"].startswith(first.text()[:100])  # the head is verbatim
    assert sent["content"].endswith(first.text()[-50:])  # and the tail
    e = by_id[first.id]
    assert e.stage == "tool outputs" and e.tokens_before is not None
    assert e.tokens_before > e.tokens > 0
    # the last rounds' outputs are sent whole
    last_tool = [m for m in history if m.role == "tool"][-1]
    assert by_id[last_tool.id].decision == "kept"
    assert any(m.get("content") == last_tool.text() for m in built.messages)
    assert built.report.used <= 0.5 * built.report.usable * 1.05
    assert protocol_errors(built.messages[1:]) == []
    assert {e.decision for e in built.report.entries} <= {"kept", "previewed", "referenced"}


def test_a_latest_round_too_big_for_the_budget_keeps_its_call_and_a_shortened_result() -> None:
    # An agent's command printed a megabyte in the turn now running: the round was dropped
    # whole ("even the latest rounds exceed the budget"), so the model was sent the user's
    # request again without its own calls and results, and started over.
    history = session(6)
    history.append(COUNTER.with_count(ConversationMessage(
        role="assistant", content=None, tool_calls=[ToolCall.model_validate({
            "id": "big", "type": "function",
            "function": {"name": "run_shell", "arguments": '{"command": "yes y"}'}})])))
    history.append(COUNTER.with_count(ConversationMessage(
        role="tool", tool_call_id="big", content="y\n" * 30_000)))
    built = build(history, full_size(history[:-2]) + 3000)
    sent = built.messages[-1]
    assert sent["role"] == "tool" and sent["tool_call_id"] == "big"
    assert built.messages[-2]["tool_calls"][0]["id"] == "big"
    assert 'read_tool_result(ref="big")' in sent["content"]
    entry = decisions(built)[history[-1].id]
    assert entry.decision in ("previewed", "referenced") and "latest rounds" in entry.reason
    assert built.report.used <= built.report.usable


def test_tighter_budgets_turn_previews_into_one_line_references() -> None:
    history = session(20)
    full = full_size(history)
    built = build(history, full // 2)
    refs = [e for e in built.report.entries if e.decision == "referenced"]
    assert refs
    ref = next(m for m in history if m.id == refs[0].id)
    sent = next(m for m in built.messages if m.get("tool_call_id") == ref.tool_call_id)
    assert "\n" not in sent["content"] and ref.tool_name in sent["content"]
    assert f'ref="{ref.tool_call_id}"' in sent["content"]
    assert f"{len(ref.text()):,} characters" in sent["content"]
    assert built.report.used <= built.report.usable


def test_the_latest_todo_list_is_always_sent_whole() -> None:
    history = session(30)
    built = build(history, full_size(history) // 6)
    todo_results = [m for m in history if m.role == "tool" and m.tool_name == "manage_todo_list"]
    assert len(todo_results) > 1
    latest = todo_results[-1]
    assert decisions(built)[latest.id].decision == "kept"
    assert any(m.get("content") == latest.text() for m in built.messages)


def test_far_over_budget_the_digest_keeps_every_left_out_request_and_what_was_done() -> None:
    history = session(40)
    full = full_size(history)
    built = build(history, full // 10)
    report = built.report
    assert report.used <= report.usable
    assert protocol_errors(built.messages[1:]) == []
    by_id = decisions(built)
    digested = [m for m in history if by_id[m.id].decision == "digested"]
    assert digested, "selection should leave whole units out"
    digest = built.messages[1]
    assert digest["role"] == "user" and digest["content"].startswith("[Context digest")
    text = digest["content"]
    for m in digested:
        if m.role == "user":  # the opening of every left-out request
            assert m.text()[:40] in text

    def path_in(text: str) -> str:
        found = re.search(r"pkg/mod_\d+\.py", text)
        assert found is not None
        return found.group(0)

    left_paths = {path_in(m.text() or "") for m in digested if m.role == "user"}
    assert left_paths and all(p in text for p in left_paths)
    assert "Files edited:" in text and "Files written:" in text
    # a failed command's line carries its error line and what the model did next
    assert re.search(r"pytest tests/test_\d+\.py → failed \(exit 1, test\): E AssertionError: line "
                     r"numbers lost in mod_\d+ → then the model: ", text)
    # a left-out entry says why, with its score
    some = next(e for e in report.entries if e.decision == "digested")
    assert some.stage == "key messages" and "score" in some.reason
    synthetic = [e for e in report.entries if e.decision == "synthetic" and e.kind == "digest"]
    assert len(synthetic) == 1 and synthetic[0].tokens > 0
    assert report.totals["summary"] >= synthetic[0].tokens
    # the latest request and the last round are sent verbatim
    last_user = [m for m in history if m.role == "user"][-1]
    assert by_id[last_user.id].decision == "kept"
    assert built.messages[-1]["content"] == history[-1].text()


def test_a_user_message_after_the_digest_gets_an_acknowledgement_between_them() -> None:
    history = session(40)
    built = build(history, full_size(history) // 10)
    assert built.messages[1]["content"].startswith("[Context digest")
    assert built.messages[2] == {"role": "assistant", "content": ACK}
    assert built.messages[3]["role"] == "user"


def test_pinned_entries_survive_selection_verbatim() -> None:
    history = session(40)
    at = next(i for i, m in enumerate(history) if m.tool_name == "read_file")  # round 0
    pinned_src = history[at]
    history[at] = pinned_src.model_copy(update={"pinned": True})
    built = build(history, full_size(history) // 10)
    assert decisions(built)[pinned_src.id].decision == "kept"
    assert any(m.get("content") == pinned_src.text() for m in built.messages)


def test_the_log_is_untouched_and_a_cached_rebuild_agrees() -> None:
    history = session(30)
    before = [m.model_dump() for m in history]
    cache = BuildCache()
    budget = full_size(history) // 5
    first = build(history, budget, cache)
    assert [m.model_dump() for m in history] == before
    again = build(history, budget, cache)
    assert again.messages == first.messages
    fresh = build(history, budget)
    assert fresh.messages == first.messages
    kept = view_json(cache.view) if cache.view is not None else None
    more = history + [COUNTER.with_count(ConversationMessage(role="user", content="one more"))]
    grown = build(more, budget, cache)
    # after an append the kept compaction is extended, not made again (a provider's prompt
    # cache reads the same prefix): a new process that reads it from disk sends the same
    again = build_request(more, "agent", model="gpt-4o", budget=Budget(budget, 0, 0, "override"),
                          counter=COUNTER, composer=PromptComposer(), cache=BuildCache(),
                          kept=kept)
    assert kept is not None and grown.messages == again.messages


def test_compaction_keeps_more_of_the_conversation_than_trimming_alone() -> None:
    history = session(40)
    budget = full_size(history) // 4
    compacted = build(history, budget)
    trimmed = build(history, budget, compact=False)
    users = [m for m in history if m.role == "user"]

    def seen(built: BuiltRequest) -> int:
        text = "\n".join(str(m.get("content")) for m in built.messages)
        return sum(u.text()[:40] in text for u in users)

    assert seen(compacted) == len(users)
    assert seen(trimmed) < len(users)


def summary_of(history: list[ConversationMessage], upto: int, text: str,
               covers_extra: list[str] | None = None) -> ConversationMessage:
    covered = [m.id for m in history[:upto]]
    return COUNTER.with_count(ConversationMessage(
        role="system", kind="summary", content=text, covers=(covers_extra or []) + covered,
        model="cheap-model"))


def test_a_summary_stands_where_its_entries_were_and_excluding_it_brings_them_back() -> None:
    history = session(12)
    cut = next(i for i in range(40, len(history)) if history[i].role == "user")
    summary = summary_of(history, cut, "SUMMARY: the user wants parsers that keep line numbers.")
    with_summary = history + [summary]
    built = build(with_summary, 10**8)
    first = built.messages[1]
    assert first["role"] == "user" and "SUMMARY: the user wants" in first["content"]
    assert built.messages[2]["role"] == "assistant" and built.messages[2]["content"] == ACK
    assert built.messages[3]["content"] == history[cut].text()
    by_id = decisions(built)
    assert all(by_id[m.id].decision == "summarized" for m in history[:cut])
    assert len(built.messages) == 1 + 2 + len(history) - cut
    undone = with_summary[:-1] + [summary.model_copy(update={"include_in_context": False})]
    back = build(undone, 10**8)
    assert back.messages[1:] == build(history, 10**8).messages[1:]


def test_a_second_summary_folds_the_first_and_undoing_it_restores_the_first() -> None:
    history = session(12)
    cuts = [i for i in range(1, len(history)) if history[i].role == "user"]
    s1 = summary_of(history, cuts[3], "S1 text")
    log1 = history + [s1]
    s2 = summary_of(history, cuts[6], "S2 text", covers_extra=[s1.id])
    log2 = log1 + [s2]
    built = build(log2, 10**8)
    text = "\n".join(str(m.get("content")) for m in built.messages)
    assert "S2 text" in text and "S1 text" not in text
    assert built.messages[3]["content"] == history[cuts[6]].text()
    undone = log1 + [s2.model_copy(update={"include_in_context": False})]
    back = build(undone, 10**8)
    text = "\n".join(str(m.get("content")) for m in back.messages)
    assert "S1 text" in text and "S2 text" not in text
    assert back.messages[3]["content"] == history[cuts[3]].text()


def chat_session(turns: int) -> list[ConversationMessage]:
    """A support chat: short requests and answers, nothing else (like the tau-bench ones)."""
    history = [ConversationMessage(role="system", content="You are an airline agent.")]
    for k in range(turns):
        history.append(ConversationMessage(
            role="user", content=f"Request {k}: please look at reservation R{k:03d} and tell me "
                                 "whether I can change it"))
        history.append(ConversationMessage(
            role="assistant", content=f"Reservation R{k:03d} can be changed for a fee of ${k}."))
    return [COUNTER.with_count(m) for m in history]


def test_at_any_budget_every_request_is_sent_or_listed_in_the_digest_or_counted_there() -> None:
    # Before: when the acknowledgement after the digest pushed the request over, a request
    # was dropped without the digest standing for it (silently lost).
    history = chat_session(24)
    full = full_size(history)
    requests = [m for m in history if m.role == "user"]
    least = build(history[:1] + history[-2:-1], 10**6).report.used  # system + latest request
    for budget in range(least + 100, full // 2, 7):  # room for a digest of a few openings
        built = build(history, budget)
        assert built.report.used <= budget
        assert not protocol_errors(built.messages[1:])
        sent = {m["content"] for m in built.messages if m["role"] == "user"}
        digest = next((c for c in sent if c.startswith("[Context digest")), "")
        unlisted = re.search(r"\((\d+) earlier (?:requests )?not listed\)", digest)
        accounted = sum(1 for r in requests
                        if r.text() in sent or f"{r.text()[:12]}" in digest)
        accounted += int(unlisted.group(1)) if unlisted else 0
        assert accounted == len(requests), (budget, digest)


def stage_names(built: BuiltRequest) -> list[str]:
    return [s["name"] for s in built.report.stages]


def test_after_a_compaction_each_request_extends_the_previous_one_until_the_trigger() -> None:
    # A provider's prompt cache needs the previous request as the exact prefix of the next:
    # the compaction is kept and only what is new is appended, until that passes the trigger.
    history = session(40)
    budget = full_size(history) // 4
    cache = BuildCache()
    previous = build(history, budget, cache)
    assert "key messages" in stage_names(previous)
    reused = 0
    for k in range(200):
        history = history + [COUNTER.with_count(m) for m in (
            ConversationMessage(role="assistant", content=f"Done with step {k}. " * 12),
            ConversationMessage(role="user", content=f"Now step {k + 1}, please."))]
        built = build(history, budget, cache)
        assert built.report.used <= budget
        if "reused" not in stage_names(built):
            break
        reused += 1
        assert built.messages[:len(previous.messages)] == previous.messages
        assert built.report.used <= TRIGGER * budget + 60
        previous = built
    else:
        raise AssertionError("the kept compaction was never renewed")
    assert reused >= 5, "a compaction should carry several turns"
    # the renewed compaction is a fresh one: what a build without the cache makes
    assert "key messages" in stage_names(built)
    assert built.messages == build(history, budget).messages


def test_a_reused_compaction_is_said_once_in_the_header() -> None:
    # The Inspector said it twice: "compaction the compaction of 2 requests ago, reused (...)"
    # and "compaction: the kept compaction, reused (2 since it was made)".
    from core.context.report_text import cli_lines, inspector_header

    history = session(40)
    budget = full_size(history) // 4
    cache = BuildCache()
    build(history, budget, cache)
    history = history + [COUNTER.with_count(ConversationMessage(role="user", content="Next."))]
    built = build(history, budget, cache)
    assert "reused" in stage_names(built)
    for text in (inspector_header(built.report), "\n".join(cli_lines(built.report, {}, 0))):
        assert text.count("reused") == 1, text


def test_a_what_if_build_and_a_budget_change_leave_or_renew_the_kept_compaction() -> None:
    history = session(40)
    budget = full_size(history) // 3
    cache = BuildCache()
    first = build(history, budget, cache)
    more = history + [COUNTER.with_count(ConversationMessage(role="user", content="and then?"))]
    what_if = build_request(more, "agent", model="gpt-4o",
                            budget=Budget(budget // 2, 0, 0, "override"), counter=COUNTER,
                            composer=PromptComposer(), cache=cache, keep_view=False)
    assert "reused" not in stage_names(what_if) and what_if.report.used <= budget // 2
    after = build(more, budget, cache)
    assert "reused" in stage_names(after)
    assert after.messages[:len(first.messages)] == first.messages
    other = build(more, budget - 500, cache)  # another budget: a new compaction
    assert "reused" not in stage_names(other) and other.report.used <= budget - 500


def test_the_meters_decision_counts_agree_with_the_entries() -> None:
    # The meter counts decisions on every refresh without making 10,000 entries; its counts
    # must be the report's.
    history = session(30)
    history.insert(5, history[5].model_copy(update={"include_in_context": False, "id": "off"}))
    full = full_size(history)
    for budget in (full * 2, full // 2, full // 5, full // 12):
        report = build(history, budget).report
        expected: dict[str, int] = {}
        for e in report.entries:
            expected[e.decision] = expected.get(e.decision, 0) + 1
        assert report.decision_counts() == expected
        assert sum(expected.values()) >= len(history)


def test_a_compaction_that_cannot_get_under_the_trigger_is_still_kept() -> None:
    # Recent rounds too big to compact: the view stays above the trigger. Compacting again on
    # every turn would change the request each time for nothing; it is kept while it fits.
    history = session(12, seed=4)
    history += [COUNTER.with_count(ConversationMessage(role="user", content="x " * 5200))]
    budget = 8000
    cache = BuildCache()
    first = build(history, budget, cache)
    assert first.report.used > TRIGGER * budget
    more = history + [COUNTER.with_count(m) for m in (
        ConversationMessage(role="assistant", content="ok"),
        ConversationMessage(role="user", content="go on"))]
    again = build(more, budget, cache)
    assert "reused" in stage_names(again)
    assert again.messages[:len(first.messages)] == first.messages


def test_calibration_moving_after_an_answer_keeps_the_compaction() -> None:
    # Each answer recalibrates our counts against the provider's a little; that must not
    # make a new compaction on every turn.
    history = session(40)
    budget = full_size(history) // 3

    def calibrated(h: list[ConversationMessage], factor: float, cache: BuildCache) -> BuiltRequest:
        return build_request(h, "agent", model="gpt-4o",
                             budget=Budget(budget, 0, 0, "override", calibration=factor),
                             counter=COUNTER, composer=PromptComposer(), cache=cache)

    cache = BuildCache()
    first = calibrated(history, 1.0, cache)
    more = history + [COUNTER.with_count(ConversationMessage(role="user", content="next"))]
    again = calibrated(more, 1.03, cache)
    assert "reused" in stage_names(again)
    assert again.messages[:len(first.messages)] == first.messages


def test_since_last_counts_the_stable_prefix_the_provider_can_reuse() -> None:
    from core.context.report_text import since_last

    history = session(20)
    first = build(history, full_size(history) // 3, BuildCache())
    cache = BuildCache()
    build(history, full_size(history) // 3, cache)
    more = history + [COUNTER.with_count(ConversationMessage(role="user", content="next"))]
    built = build(more, full_size(history) // 3, cache)
    line = since_last(first.messages, None, built.messages, built.report, COUNTER, "now")
    same = len(first.messages)
    assert built.messages[:same] == first.messages
    stable = sum(COUNTER.openai_message(m) for m in built.messages[:same])
    total = sum(COUNTER.openai_message(m) for m in built.messages)
    assert f"the first {same:,} of {len(built.messages):,} messages are identical" in line
    assert f"a stable prefix of {stable:,} tokens ({100 * stable / total:.0f}%)" in line


def test_a_what_if_build_on_a_fork_leaves_the_cache_as_it_was() -> None:
    history = session(40)
    budget = full_size(history) // 3
    cache = BuildCache()
    first = build(history, budget, cache)
    draft = history + [COUNTER.with_count(ConversationMessage(role="user", content="draft " * 50))]
    fork = cache.fork()
    with_draft = build(draft, budget, fork)
    assert with_draft.messages[-1]["content"].startswith("draft draft")
    assert cache.history[-1] is history[-1] and len(cache.history) == len(history)
    assert [u.latest_user for u in cache.units].count(True) == 1
    more = history + [COUNTER.with_count(ConversationMessage(role="user", content="sent"))]
    after = build(more, budget, cache)
    assert "reused" in stage_names(after)  # the real cache went on where it was
    assert after.messages[:len(first.messages)] == first.messages
    assert after.messages == build(more, budget, BuildCache.fork(cache)).messages


def test_a_kept_request_stores_its_entries_as_rows_and_both_forms_read_back() -> None:
    from core.context.report import entry_dicts

    report = build(session(10), 4000).report
    full, compact = report.to_json(), report.to_json(compact=True)
    assert entry_dicts(compact) == entry_dicts(full) == full["entries"]
    assert len(json.dumps(compact)) < 0.7 * len(json.dumps(full))


def test_the_sent_ids_agree_with_the_entries_in_every_form() -> None:
    from core.context.report import sent_in

    report = build(session(20), full_size(session(20)) // 4).report
    sent = {e.id for e in report.entries if e.decision in ("kept", "previewed", "referenced")}
    assert report.sent_ids() == sent
    assert sent_in(report.to_json(), ("kept", "previewed", "referenced")) == sent
    assert sent_in(report.to_json(compact=True), ("kept", "previewed", "referenced")) == sent


def test_a_report_read_after_later_builds_still_tells_its_own_request() -> None:
    # The decisions are made into entries only when asked (maybe later, on another thread);
    # by then the cache has grown its lists for newer builds. Before: IndexError.
    history = session(12)
    cache = BuildCache()
    first = build(history, 10**6, cache)
    expected_ids = [m.id for m in history if m.kind == "message"]
    for k in range(3):
        history = history + [COUNTER.with_count(ConversationMessage(role="user",
                                                                    content=f"more {k}"))]
        build(history, 10**6, cache)
    assert [e.id for e in first.report.entries if e.decision == "kept"] == \
        [i for i in expected_ids if i in {e.id for e in first.report.entries}]
    assert len(first.report.entries) == len(expected_ids)


def test_a_walk_over_the_decisions_can_pause_and_gives_the_same_rows() -> None:
    from core.context.report import PAUSE_EVERY

    report = build(session(120), 10**6).report
    pauses: list[int] = []
    paused = list(report.rows(lambda: pauses.append(1)))
    assert paused == list(report.rows())
    assert pauses and len(pauses) == len(paused) // PAUSE_EVERY
    assert report.to_json(compact=True, pause=lambda: None) == report.to_json(compact=True)


def test_a_paused_summary_plan_covers_the_same_entries_and_reads_the_same() -> None:
    from core.context.summary import chunks, plan_summary

    history = session(200, seed=4)  # long enough for several pauses
    plain = plan_summary(history, COUNTER)
    pauses: list[int] = []
    paused = plan_summary(history, COUNTER, pause=lambda: pauses.append(1))
    assert paused.covers == plain.covers and paused.covered_tokens == plain.covered_tokens
    assert len(paused.covers) > 500 and pauses
    before = len(pauses)
    assert chunks(paused.entries, 4000, COUNTER, lambda: pauses.append(1)) == \
        chunks(plain.entries, 4000, COUNTER)
    assert len(pauses) > before


# --- what the digest keeps of a working session: failures, the user's rules, the plan ---------


def imported(raw: list[dict[str, Any]]) -> list[ConversationMessage]:
    """An imported session: OpenAI messages, no exit codes, no tool names, no statuses."""
    return [COUNTER.with_count(ConversationMessage.from_openai(m)) for m in raw]


def bash(cid: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function",
         "function": {"name": "Bash", "arguments": json.dumps({"command": command})}}]}


def filler(rounds: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in range(rounds):
        out.append({"role": "user", "content": f"Look at part {r} of the module."})
        out.append(bash(f"f{r}", f"cat part_{r}.txt"))
        out.append({"role": "tool", "tool_call_id": f"f{r}", "content": "line of text\n" * 300})
        out.append({"role": "assistant", "content": f"Part {r} reads fine. " * 30})
    return out


def digest_of(built: BuiltRequest) -> str:
    digest: str = next(m["content"] for m in built.messages
                       if str(m.get("content")).startswith("[Context digest"))
    return digest


def test_a_failed_command_of_an_imported_session_is_named_with_its_error_lines() -> None:
    # No exit code anywhere: the failure is read from the output, in its middle.
    mypy = ("Checking reproduce.py\n" + "note: module loaded\n" * 40
            + 'reproduce.py:6: error: Name "UNDEFINED" is not defined  [name-defined]\n'
            + "note: see docs\n" * 40 + "Found 1 error in 1 file (checked 1 source file)\n")
    history = imported([
        {"role": "user", "content": "Why does mypy complain?"},
        bash("m1", "python3 -m mypy reproduce.py"),
        {"role": "tool", "tool_call_id": "m1", "content": mypy},
        {"role": "assistant", "content": "UNDEFINED is never defined; I will define it."},
        *filler(30)])
    built = build(history, full_size(history) // 8)
    line = next(x for x in digest_of(built).splitlines() if "mypy reproduce.py" in x)
    assert line == ('- python3 -m mypy reproduce.py → failed (compiler): reproduce.py:6: error: '
                    'Name "UNDEFINED" is not defined [name-defined] … Found 1 error in 1 file '
                    '(checked 1 source file) → then the model: UNDEFINED is never defined; I '
                    'will define it.')
    # the filler's reads went well: said so, not read for error words
    assert any(x.endswith("cat part_0.txt → ok") for x in digest_of(built).splitlines())


def test_a_failure_a_later_run_fixed_says_it_was_resolved() -> None:
    history = imported([
        {"role": "user", "content": "Make the build pass."},
        bash("b1", "go build ./... 2>&1 | head -50"),
        {"role": "tool", "tool_call_id": "b1", "content": "# x\ncmd/x.go:8:15: undefined: cpID\n"},
        {"role": "assistant", "content": "cpID is gone; renaming."},
        bash("b2", "go build ./..."),
        {"role": "tool", "tool_call_id": "b2", "content": ""},
        *filler(30)])
    digest = digest_of(build(history, full_size(history) // 8))
    line = next(x for x in digest.splitlines() if "head -50" in x)
    assert line.startswith("- go build ./... 2>&1 | head -50 → failed (compiler): cmd/x.go:8:15: "
                           "undefined: cpID → then the model: cpID is gone; renaming.")
    assert line.endswith("→ resolved: a later `go build ./...` went well")


def test_an_old_failed_output_shown_as_a_preview_keeps_the_lines_that_name_the_failure() -> None:
    # The compiler's error sits past the preview's head and far before its tail.
    log = ("".join(f"compiling package {k}\n" for k in range(80))
           + "cmd/x.go:8:15: undefined: cpID\n"
           + "".join(f"linking step {k}\n" for k in range(700)) + "done\n")
    history = imported([{"role": "user", "content": "Build it."}, bash("p1", "go build ./..."),
                        {"role": "tool", "tool_call_id": "p1", "content": log},
                        {"role": "assistant", "content": "The build fails on cpID."},
                        *filler(3)])
    forms = {}
    for share in range(90, 20, -2):
        built = build(history, int(full_size(history) * share / 100))
        sent = next(m["content"] for m in built.messages if m.get("tool_call_id") == "p1")
        forms["preview" if "characters (" in sent else
              "reference" if sent.startswith("[") else "whole"] = sent
    assert {"preview", "reference"} <= set(forms)
    assert "cmd/x.go:8:15" not in forms["preview"].split("[…")[0]  # not in the head shown ...
    assert "left out to fit the context; it says: cmd/x.go:8:15: undefined: cpID; " \
           "read_tool_result" in forms["preview"]  # ... but named where the rest is left out
    assert forms["reference"].startswith(f"[tool output (failed, {len(log):,} characters: "
                                         "cmd/x.go:8:15: undefined: cpID) left out")


def test_the_users_rules_are_kept_word_for_word_newest_wording_first_to_stay() -> None:
    long_request = ("Some background on the parser. " * 120
                    + "You must keep line numbers in every error message. Thanks.")
    history = imported([
        {"role": "user", "content": long_request},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "never change the public API."},
        {"role": "assistant", "content": "Noted."},
        *filler(20),
        {"role": "user", "content": "Never change the public API!"},
        {"role": "assistant", "content": "Still noted."},
        *filler(20)])
    for share in (8, 40):  # a digest with room, and one squeezed
        built = build(history, full_size(history) // share)
        digest = digest_of(built)
        rules = digest.split("Rules you stated (the user's own words, newest wording):\n")[1]
        # the rule deep in the long request, whose opening alone the digest keeps
        assert rules.startswith("- You must keep line numbers in every error message.\n")
        sent = json.dumps(built.messages, ensure_ascii=False)
        assert "Never change the public API!" in sent  # the newest wording ...
        rules = rules.split("The user's earlier messages")[0]
        assert "never change the public API." not in rules  # ... not the older one again


def test_the_plan_is_replayed_from_the_apps_own_todo_calls() -> None:
    from core.context.digest import digest
    from core.context.fold import fold_units
    from core.context.memo import Compaction, CompactionMemo
    from core.context.units import group_units

    def todo(cid: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "manage_todo_list", "arguments": json.dumps(args)}}]},
                {"role": "tool", "tool_call_id": cid, "content": "Todo list ..."}]

    history = imported([{"role": "user", "content": "Plan it."},
                        *todo("t1", {"action": "set", "items": ["read", "fix", "test"]}),
                        *todo("t2", {"action": "complete", "number": 1}),
                        *todo("t3", {"action": "update", "number": 2,
                                     "status": "in_progress"}),
                        {"role": "assistant", "content": "Working on the fix."}])
    cands = [(m, m.token_counts.get("o200k_base", 10)) for m in history]
    units = group_units(cands)
    plan = Compaction(cands, [u.tokens for u in units])
    every = range(len(units))
    text, _ = digest(fold_units(plan, units, every, CompactionMemo()), 2000, COUNTER,
                     CompactionMemo())
    assert ("The todo list (its latest change is left out here):\nTodo list (1 of 3 done):\n"
            "1. [x] read\n2. [~] fix\n3. [ ] test") in text
    # while its latest change is sent (its result shows the list), the digest leaves it out
    older = [n for n in every if "t3" not in json.dumps(
        [cands[i][0].model_dump(mode="json") for i in units[n].items])]
    text, _ = digest(fold_units(plan, units, older, CompactionMemo()), 2000, COUNTER,
                     CompactionMemo())
    assert "todo list" not in text.lower()


def test_paths_in_one_folder_name_it_once() -> None:
    root = "/Users/someone/work/project"
    history = imported([{"role": "user", "content": "Read the sources."}] + [
        m for k in range(8) for m in (
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"r{k}", "type": "function", "function": {
                    "name": "Read", "arguments": json.dumps(
                        {"file_path": f"{root}/{'src' if k % 2 else 'lib'}/m{k}.py"})}}]},
            {"role": "tool", "tool_call_id": f"r{k}", "content": "code\n" * 400})] + filler(25))
    digest = digest_of(build(history, full_size(history) // 8))
    assert f"Paths below are in {root}/ unless they start with /." in digest
    assert "Files read: lib/m0.py, src/m1.py" in digest and f"{root}/src" not in digest


def test_workbench_context_gives_the_digests_size() -> None:
    from core.context.report_text import cli_lines

    history = session(40)
    report = build(history, full_size(history) // 10).report
    digest_line = next(x for x in cli_lines(report, {}, 0) if "(digest) synthetic" in x)
    size = report.shown(report.totals["summary"])
    assert f" {size:,} tok " in digest_line and size > 0, digest_line  # said "0 tok"

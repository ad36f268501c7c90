"""Pin, unpin, exclude, include: annotations appended to the log (no line rewritten), folded in
when it loads, honoured by every request, shown in the window, undoing a summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, annotation, fold_annotations
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, summary_text
from tests.helpers.trajectories import make_agent_session

COUNTER = TokenCounter("o200k_base")


def session(path: Path, rounds: int = 10) -> tuple[str, list[ConversationMessage]]:
    with Project.open(path) as p:
        conv = p.conversations.create("s").id
        msgs = [COUNTER.with_count(m) for m in make_agent_session(rounds, seed=2)]
        p.conversations.append_many(conv, msgs)
        return conv, msgs


def log_of(path: Path, conv: str) -> bytes:
    return (path / ".workbench" / "conversations" / conv / "messages.jsonl").read_bytes()


def decisions(capsys: pytest.CaptureFixture[str], project: Path, conv: str,
              budget: int | None = None) -> dict[str, Any]:
    extra = ["--budget", budget] if budget else []
    code, out, err = cli(capsys, "context", project, "-c", conv, "--model", "gpt-4o", "--json",
                         *extra)
    assert code == 0, err
    data = json.loads(out)
    return {"by_id": {e["id"]: e for e in data["report"]["entries"]}, "data": data}


def test_the_latest_annotation_of_an_entry_wins_and_the_annotations_stay_in_the_log() -> None:
    a = ConversationMessage(role="user", content="a")
    b = ConversationMessage(role="assistant", content="b")
    log = [a, b, annotation(a.id, "pin"), annotation(b.id, "exclude"),
           annotation(a.id, "unpin"), annotation(a.id, "pin")]
    folded = fold_annotations(log)
    assert folded[0].pinned and not folded[1].include_in_context
    assert len(folded) == len(log) and folded[2].kind == "annotation"
    assert not a.pinned  # the entries themselves are never changed
    with pytest.raises(ValueError, match="annotation needs"):
        ConversationMessage(role="system", kind="annotation", content="delete", target=a.id)


def test_pin_and_exclude_change_the_next_request_and_only_append(capsys: pytest.CaptureFixture[str],
                                                                 project_dir: Path) -> None:
    conv, msgs = session(project_dir)
    first_user = msgs[0]
    old_result = next(m for m in msgs if m.tool_name == "read_file")
    before = log_of(project_dir, conv)
    full = decisions(capsys, project_dir, conv)["data"]["report"]["used"]
    small = full // 5
    assert decisions(capsys, project_dir, conv, small)["by_id"][old_result.id]["decision"] != "kept"
    code, out, _ = cli(capsys, "pin", project_dir, "-c", conv, old_result.id[:-4])
    assert code == 0 and "pinned" in out
    code, out, _ = cli(capsys, "exclude", project_dir, "-c", conv, first_user.id)
    assert code == 0 and "excluded" in out
    after = log_of(project_dir, conv)
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 2
    got = decisions(capsys, project_dir, conv, small)
    assert got["by_id"][old_result.id]["decision"] == "kept"
    assert old_result.text() in json.dumps(got["data"]["messages"], ensure_ascii=False) \
        or old_result.text() in [m.get("content") for m in got["data"]["messages"]]
    excluded = got["by_id"][first_user.id]
    assert excluded["decision"] == "excluded" and "left out by you" in excluded["reason"]
    assert first_user.text() not in json.dumps(got["data"]["messages"], ensure_ascii=False)
    # already so: nothing appended; back again: the entry returns
    code, out, _ = cli(capsys, "pin", project_dir, "-c", conv, old_result.id)
    assert code == 0 and "already pinned" in out and log_of(project_dir, conv) == after
    assert cli(capsys, "include", project_dir, "-c", conv, first_user.id)[0] == 0
    assert decisions(capsys, project_dir, conv)["by_id"][first_user.id]["decision"] == "kept"


def test_a_wrong_entry_id_is_a_clear_error_and_changes_nothing(capsys: pytest.CaptureFixture[str],
                                                               project_dir: Path) -> None:
    conv, _ = session(project_dir, 2)
    before = log_of(project_dir, conv)
    code, _, err = cli(capsys, "exclude", project_dir, "-c", conv, "nosuchid")
    assert code == 1 and "no entry 'nosuchid'" in err
    code, _, err = cli(capsys, "pin", project_dir, "-c", conv, "")
    assert code == 1
    code, _, err = cli(capsys, "pin", project_dir, "-c", conv, conv[:4])  # ids share a prefix
    assert code == 1 and ("give more of the id" in err or "no entry" in err)
    assert log_of(project_dir, conv) == before


def test_exports_carry_the_state_but_not_the_annotations_as_messages(
        capsys: pytest.CaptureFixture[str], project_dir: Path) -> None:
    conv, msgs = session(project_dir, 2)
    cli(capsys, "pin", project_dir, "-c", conv, msgs[0].id)
    code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "openai")
    assert code == 0 and all(m["role"] != "system" for m in json.loads(out)["messages"])
    code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "markdown")
    assert "## User (pinned)" in out
    code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "jsonl")
    lines = [json.loads(line) for line in out.splitlines()]
    assert any(e.get("kind") == "annotation" and e.get("target") == msgs[0].id for e in lines)


def test_excluding_a_summary_undoes_it_and_including_it_redoes_it(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    llm_server.info["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 128_000}]}
    conv, msgs = session(project_dir)
    llm_server.script(Answer(summary_text("THE SUMMARY")))
    code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0, err
    with Project.open(project_dir, read_only=True) as p:
        summary = p.conversations.load(conv).messages[-1]
    assert summary.kind == "summary"
    text = json.dumps(decisions(capsys, project_dir, conv)["data"]["messages"])
    assert "THE SUMMARY" in text and msgs[0].text() not in text
    assert cli(capsys, "exclude", project_dir, "-c", conv, summary.id)[0] == 0
    text = json.dumps(decisions(capsys, project_dir, conv)["data"]["messages"])
    assert "THE SUMMARY" not in text and msgs[0].text() in text
    assert cli(capsys, "include", project_dir, "-c", conv, summary.id)[0] == 0
    assert "THE SUMMARY" in json.dumps(decisions(capsys, project_dir, conv)["data"]["messages"])


def _sent_after_send(capsys: pytest.CaptureFixture[str], project_dir: Path, conv: str,
                     llm_server: FakeLLMServer) -> list[dict[str, Any]]:
    llm_server.script(Answer("ok"))
    code, _, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                       llm_server.url, "go on")
    assert code == 0, err
    sent: list[dict[str, Any]] = llm_server.requests[-1].body["messages"]
    return sent


def _round(sent: list[dict[str, Any]],
           call_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    call = next((m for m in sent if any(c["id"] == call_id for c in m.get("tool_calls") or ())),
                None)
    result = next((m for m in sent if m.get("tool_call_id") == call_id), None)
    return call, result


@pytest.mark.parametrize("pin_first", [True, False], ids=["pin-then-compact",
                                                          "compact-then-pin"])
@pytest.mark.parametrize("which", ["call", "result"])
def test_a_pin_keeps_its_whole_tool_round_through_a_summary(capsys: pytest.CaptureFixture[str],
                                                            project_dir: Path,
                                                            llm_server: FakeLLMServer,
                                                            pin_first: bool, which: str) -> None:
    """A pinned call is sent with the result that answered it (and a pinned result with its
    call), whichever came first, the pin or the summary: never an "aborted" stand-in for a
    command that ran."""
    from core.context.normalize import ABORTED_RESULT, protocol_errors

    llm_server.info["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 128_000}]}
    conv, msgs = session(project_dir)
    call = next(m for m in msgs if m.tool_calls and m.tool_calls[0].id == "c1c")
    result = next(m for m in msgs if m.tool_call_id == "c1c")
    target = call if which == "call" else result

    def compact() -> None:
        llm_server.script(Answer(summary_text("THE SUMMARY")))
        code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                           "--api-base", llm_server.url)
        assert code == 0, err

    if not pin_first:
        compact()
    assert cli(capsys, "pin", project_dir, "-c", conv, target.id)[0] == 0
    if pin_first:
        compact()
    sent = _sent_after_send(capsys, project_dir, conv, llm_server)
    assert "THE SUMMARY" in json.dumps(sent)  # the summary stands for the rest
    assert protocol_errors(sent[1:]) == []
    sent_call, sent_result = _round(sent, "c1c")
    assert sent_call is not None and sent_result is not None
    assert sent_result["content"] == result.text()  # what the command printed, not a stand-in
    assert ABORTED_RESULT not in json.dumps(sent)
    # and what the window and `workbench context` say agrees
    by_id = decisions(capsys, project_dir, conv)["by_id"]
    assert by_id[call.id]["decision"] == by_id[result.id]["decision"] == "kept"


def test_excluding_one_part_of_a_tool_round_leaves_the_round_out_whole(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    """Excluding a tool result (or the call) leaves out its call and results together, saying
    why; never a call sent with an "aborted" stand-in for a result that exists."""
    from core.context.normalize import ABORTED_RESULT, protocol_errors

    llm_server.info["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 128_000}]}
    conv, msgs = session(project_dir)
    call = next(m for m in msgs if m.tool_calls and m.tool_calls[0].id == "c9c")
    result = next(m for m in msgs if m.tool_call_id == "c9c")
    assert cli(capsys, "exclude", project_dir, "-c", conv, result.id)[0] == 0
    sent = _sent_after_send(capsys, project_dir, conv, llm_server)
    assert protocol_errors(sent[1:]) == []
    assert _round(sent, "c9c") == (None, None)
    assert ABORTED_RESULT not in json.dumps(sent)
    by_id = decisions(capsys, project_dir, conv)["by_id"]
    assert by_id[result.id]["decision"] == by_id[call.id]["decision"] == "excluded"
    assert "tool round" in by_id[call.id]["reason"]

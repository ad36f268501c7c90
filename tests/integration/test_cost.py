"""What answers cost: kept with each answer from the usage the loopback server reports and
litellm's price map (read offline), summed by `workbench usage`, kept across a restart and an
export/import round trip, and a spending cap that refuses before anything reaches the wire."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import Answer, FakeLLMServer

PRICED = "openai/gpt-4o-mini"  # a paid model's name behind a local gateway: it costs money


def send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer, *extra: object,
         text: str = "hi") -> tuple[int, str, str]:
    return cli(capsys, "send", project, "--model", PRICED, "--api-base", server.url, *extra, text)


def answers(project: Path) -> list[ConversationMessage]:
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        return [m for m in p.conversations.load(conv).messages if m.role == "assistant"]


def litellm_price(prompt: int, completion: int, cached: int = 0) -> float:
    from core.llm.runtime import load_litellm

    litellm = load_litellm()
    a, b = litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=prompt,
                                  completion_tokens=completion, cache_read_input_tokens=cached)
    return float(a) + float(b)


def test_an_answer_keeps_what_it_cost_as_litellm_prices_it(capsys: pytest.CaptureFixture[str],
                                                           project_dir: Path,
                                                           llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("one", usage=(1000, 50), cached=200))
    code, _, err = send(capsys, project_dir, llm_server, "--new", "--title", "t")
    assert code == 0, err
    [answer] = answers(project_dir)
    expected = litellm_price(1000, 50, cached=200)
    assert answer.cost_usd == pytest.approx(expected, rel=0.01)
    assert answer.cost_usd is not None
    assert answer.cost_usd < litellm_price(1000, 50)  # the cached part is cheaper

    code, out, _ = cli(capsys, "usage", project_dir, "--json")  # a fresh process's reading
    total = json.loads(out)["total"]
    assert code == 0 and total["requests"] == 1 and total["cached_tokens"] == 200
    assert total["cost_usd"] == pytest.approx(expected, rel=0.01)
    assert total["cache_saved_usd"] > 0


def test_an_answer_without_reported_usage_says_its_cost_is_estimated(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    llm_server.stream_usage = False  # no usage in the stream, as llama.cpp's server
    llm_server.script(Answer("one"))
    assert send(capsys, project_dir, llm_server, "--new", "--title", "t")[0] == 0
    [answer] = answers(project_dir)
    assert answer.usage is not None
    assert answer.usage["estimated"] and answer.cost_usd is not None
    code, _, err = cli(capsys, "usage", project_dir)
    assert code == 0 and "1 request(s) whose usage the provider did not report" in err


def test_a_model_without_a_price_costs_unknown_never_a_made_up_figure(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("one", usage=(100, 10)))
    assert cli(capsys, "send", project_dir, "--new", "--title", "t", "--model",
               "openai/my-local-model", "--api-base", llm_server.url, "hi")[0] == 0
    [answer] = answers(project_dir)
    assert answer.cost_usd is None
    code, out, err = cli(capsys, "usage", project_dir)
    assert "unknown" in out.splitlines()[-1] and "without a price" in err


def test_the_cap_refuses_before_the_wire(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                         llm_server: FakeLLMServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    llm_server.script(Answer("one", usage=(1000, 50)))
    assert send(capsys, project_dir, llm_server, "--new", "--title", "t")[0] == 0
    conv = Project.open(project_dir, read_only=True)
    conv_id = conv.conversations.list()[0].id
    conv.close()
    monkeypatch.setenv("WORKBENCH_COST_CAP", "0.0001")  # already spent: 0.00018
    code, _, err = send(capsys, project_dir, llm_server, "-c", conv_id, text="more")
    assert code == 2 and "has spent $0.0002 of its $0.0001 cap" in err
    assert "nothing was sent" in err and len(llm_server.requests) == 1
    with Project.open(project_dir, read_only=True) as p:  # and nothing was written
        assert len(p.conversations.load(conv_id).messages) == 2

    monkeypatch.setenv("WORKBENCH_COST_CAP", "1")  # raised: it goes
    llm_server.script(Answer("two", usage=(1100, 50)))
    assert send(capsys, project_dir, llm_server, "-c", conv_id, text="more")[0] == 0


def test_costs_survive_an_export_and_import_and_count_as_imported(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        tmp_path: Path) -> None:
    llm_server.script(Answer("one", usage=(1000, 50)))
    assert send(capsys, project_dir, llm_server, "--new", "--title", "t")[0] == 0
    [answer] = answers(project_dir)
    code, out, _ = cli(capsys, "export", project_dir, "-c", _conv(project_dir),
                       "--format", "jsonl")
    log = tmp_path / "session.jsonl"
    log.write_text(out, encoding="utf-8")
    other = tmp_path / "other"
    assert cli(capsys, "import", other, log)[0] == 0
    code, out, err = cli(capsys, "usage", other, "--json")
    total = json.loads(out)["total"]
    assert total["imported_requests"] == 1
    assert total["cost_usd"] == pytest.approx(answer.cost_usd, rel=1e-9)


def _conv(project: Path) -> str:
    with Project.open(project, read_only=True) as p:
        return p.conversations.list()[0].id


def test_an_agent_pauses_between_rounds_once_the_cap_is_spent(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.fake_llm import ToolCalls

    monkeypatch.setenv("WORKBENCH_COST_CAP", "0.0003")  # the first request fits under it
    project_dir.mkdir()
    (project_dir / "a.txt").write_text("hello\n", encoding="utf-8")
    llm_server.script(ToolCalls([("r1", "read_file", '{"path": "a.txt"}')], usage=(3000, 50)),
                      Answer("never asked"))
    code, _, err = send(capsys, project_dir, llm_server, "--new", "--title", "t", "--mode",
                        "agent", "--approve", "never", text="read it")
    assert code == 2 and "The agent paused: this conversation has spent $0.0005" in err
    assert len(llm_server.requests) == 1  # the round's result is kept, no second request
    monkeypatch.setenv("WORKBENCH_COST_CAP", "1")
    code, out, err = cli(capsys, "continue", project_dir, "-c", _conv(project_dir), "--model",
                         PRICED, "--api-base", llm_server.url, "--mode", "agent")
    assert code == 0, err
    assert out.strip() == "never asked" and len(llm_server.requests) == 2

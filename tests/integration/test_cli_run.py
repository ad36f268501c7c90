"""`workbench run` and `workbench workflows` against the loopback server, on a real folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, HttpError
from tests.integration.test_run import BRIEFS, WORKFLOW, complete


def model_args(server: FakeLLMServer) -> list[str]:
    return ["--model", MODEL, "--api-base", server.url]


@pytest.fixture
def flow_file(tmp_path: Path) -> Path:
    path = tmp_path / "release.json"
    path.write_text(json.dumps(WORKFLOW))
    return path


def conversation(project: Path) -> str:
    with Project.open(project, read_only=True) as p:
        return p.conversations.list()[0].id


def test_run_from_a_file_to_completion_then_listed(capsys: pytest.CaptureFixture[str],
                                                   project_dir: Path, flow_file: Path,
                                                   llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), complete("c2", "drafted"),
                      complete("c3", "reviewed"), Answer("All three steps are done."))
    code, out, err = cli(capsys, "run", project_dir, "--new", "--workflow", flow_file,
                         "--goal", "v2.0", *model_args(llm_server))
    assert code == 0, err
    assert "All three steps are done." in out
    assert "✓ step 1/3 Collect the changes — done: listed" in err
    assert "The workflow is complete." in err
    assert "copied into the project as release-notes.json" in err
    for n, brief in enumerate(BRIEFS):
        assert brief in llm_server.requests[n].body["messages"][0]["content"]
    assert (project_dir / ".workbench" / "workflows" / "release-notes.json").is_file()
    code, out, err = cli(capsys, "workflows", project_dir)
    assert code == 0 and "Release notes  (release-notes.json, 3 steps)" in out
    assert "Collect the changes → Draft the notes → Review" in out
    # by name, a second time: nothing copied again
    llm_server.script(Answer("nothing to do"), Answer("really nothing"))
    code, _, err = cli(capsys, "run", project_dir, "--new", "--workflow", "release notes",
                       *model_args(llm_server))
    assert code == 3 and "copied" not in err and "without completing the step" in err
    conv = next(line.split()[1] for line in err.splitlines() if line.startswith("conversation"))
    assert f"workbench send {project_dir} --conversation {conv[:12]}" in err
    # answering from the command line joins the step, and the run goes on from there
    llm_server.script(complete("d1", "listed from the answer"), complete("d2", "drafted"),
                      complete("d3", "reviewed"), Answer("All done now."))
    code, out, err = cli(capsys, "send", project_dir, "--conversation", conv,
                         "--model", MODEL, "--api-base", llm_server.url, "they are in CHANGES")
    assert code == 0, err
    assert "✓ step 1/3 Collect the changes — done: listed from the answer" in err
    assert "The workflow is complete." in err and "All done now." in out


def test_an_error_mid_run_exits_2_and_resume_carries_on_at_the_step(
        capsys: pytest.CaptureFixture[str], project_dir: Path, flow_file: Path,
        llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), HttpError(500, "down"))
    code, _, err = cli(capsys, "run", project_dir, "--new", "--workflow", flow_file,
                       *model_args(llm_server))
    assert code == 2 and "HTTP 500" in err
    conv = conversation(project_dir)
    assert f"workbench run {project_dir} --conversation {conv[:12]} --resume" in err
    llm_server.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Done."))
    code, out, err = cli(capsys, "run", project_dir, "--conversation", conv, "--resume",
                         *model_args(llm_server))
    assert code == 0, err
    resumed = llm_server.requests[2].body["messages"][0]["content"]
    assert "BRIEF-DRAFT" in resumed and "BRIEF-COLLECT" not in resumed
    code, _, err = cli(capsys, "run", project_dir, "--conversation", conv, "--resume",
                       *model_args(llm_server))
    assert code == 1 and "is finished; there is nothing to resume" in err


@pytest.mark.parametrize(("args", "code", "said"), [
    (["--new"], 64, "say which workflow to run"),
    (["--new", "--resume", "--workflow", "x"], 64, "--resume carries on"),
    (["--new", "--workflow", "nope"], 1, "there is no workflow 'nope'"),
])
def test_run_usage_mistakes_are_explained(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                          args: list[str], code: int, said: str) -> None:
    got, _, err = cli(capsys, "run", project_dir, *args, "--model", MODEL)
    assert got == code and said in err
    assert not (project_dir / ".workbench" / "conversations").exists() or \
        not list((project_dir / ".workbench" / "conversations").glob("*/messages.jsonl"))


def test_a_broken_workflow_file_is_refused_before_anything_is_sent(
        capsys: pytest.CaptureFixture[str], project_dir: Path, tmp_path: Path,
        llm_server: FakeLLMServer) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n "steps": [\n  {"id": "a", "title": "A"}\n ]\n}')
    code, _, err = cli(capsys, "run", project_dir, "--new", "--workflow", bad,
                       *model_args(llm_server))
    assert code == 1 and "bad.json: steps.1.brief is missing" in err
    assert llm_server.requests == []
    (project_dir / ".workbench" / "workflows").mkdir(parents=True)
    (project_dir / ".workbench" / "workflows" / "broken.json").write_text("{oops")
    code, _, err = cli(capsys, "workflows", project_dir)
    assert code == 0 and "broken.json is not valid JSON: Expecting property name" in err


def test_a_workflow_too_long_for_the_window_is_named_not_the_message(
        capsys: pytest.CaptureFixture[str], project_dir: Path, tmp_path: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from core.llm.runtime import load_litellm

    load_litellm()  # refused before any request: the import it starts must not outlive the test
    steps = [{"id": f"s{n}", "title": f"Step {n}", "brief": f"check part {n} of the code",
              "done_when": f"part {n} is checked"} for n in range(300)]
    flow = tmp_path / "long.json"
    flow.write_text(json.dumps({"name": "Long", "steps": steps}))
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "4000")
    code, _, err = cli(capsys, "run", project_dir, "--new", "--workflow", flow,
                       *model_args(llm_server))
    assert code == 2 and not llm_server.requests
    assert "the workflow's directive" in err and "Shorten the workflow" in err
    assert "Shorten the message" not in err

"""The product against a real local server (`make real-llm`; see `tests/real/__main__.py`).

llama-cpp-python's server with SmolLM2-135M-Instruct and `--n_ctx 2048`: no window on
/v1/models, no usage in streams, an empty 200 for a streamed request over its window. Every
scenario drives the product's own command line in a fresh process, as a user would, and prints
what it measured. Skipped unless WORKBENCH_REAL_LLM_URL names the server.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

URL = os.environ.get("WORKBENCH_REAL_LLM_URL", "")  # read before the fixtures clear WORKBENCH_*
TOOLS_URL = os.environ.get("WORKBENCH_REAL_LLM_TOOLS_URL", "")  # chatml-function-calling
LOG = os.environ.get("WORKBENCH_REAL_LLM_LOG", "")  # the chat server's own log (access lines)
TOOLS_LOG = os.environ.get("WORKBENCH_REAL_LLM_TOOLS_LOG", "")
MODEL = "openai/smol"
PROVED: list[str] = []  # what each scenario showed of the server, said again at the end
ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the parser keeps line numbers while the lexer reads each token from the file and "
         "reports errors with their column so that a user can find the broken line quickly "
         "in a large project with many modules tests and scripts written over several years"
         ).split()

pytestmark = pytest.mark.skipif(not URL, reason="needs WORKBENCH_REAL_LLM_URL (make real-llm)")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-home")


@pytest.fixture(scope="module", autouse=True)
def proved() -> Iterator[None]:
    """Each scenario that passed says what it proved, once more, together at the end."""
    yield
    print("\n\nreal-llm: proved against llama-cpp-python serving SmolLM2-135M-Instruct:")
    print("\n".join(f"  - {line}" for line in PROVED) or "  nothing")


class ServerLog:
    """A server's log (the chat server's unless told) from now on (uvicorn's access lines, llama-cpp-python's words):
    what a scenario's commands asked of it, seen from the server's side."""

    def __init__(self, log: str = LOG) -> None:
        self.path = Path(log) if log else None
        self.start = self.path.stat().st_size if self.path is not None else 0

    def text(self) -> str:
        if self.path is None:
            return ""
        with self.path.open("rb") as f:
            f.seek(self.start)
            return f.read().decode("utf-8", "replace")

    def statuses(self) -> list[int]:
        """The status the server gave each chat request since, in order (a streamed refusal
        is an empty 200; the product then asks it unstreamed, and that one is a 400)."""
        return [int(code) for code in
                re.findall(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', self.text())]

    def cut(self) -> int:
        """Streams the server ended because another request arrived (or lost their reader)."""
        return self.text().count("Disconnected from client")


def cli(home: Path, *args: object, timeout: float = 600, stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env.update(XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               XDG_STATE_HOME=str(home / "state"), WORKBENCH_AUTO_RETRIES="0",
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    return subprocess.run([sys.executable, "-m", "app.cli.main", *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout,
                          input=stdin)


def flags(*extra: object) -> list[object]:
    return ["--model", MODEL, "--api-base", URL, *extra]


def message(turn: int, rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(40 + 25 * turn)]
    return f"Turn {turn}. Remember this note: " + " ".join(words) + ". Answer in one sentence."


def server_count(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """The server's own count of a request's prompt (asked unstreamed, one token out)."""
    body: dict[str, Any] = {"model": "smol", "messages": messages, "max_tokens": 1, "stream": False}
    if tools:
        body["tools"] = tools
    request = urllib.request.Request(f"{URL}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as r:
        return int(json.loads(r.read())["usage"]["prompt_tokens"])


def answered(done: subprocess.CompletedProcess[str]) -> bool:
    """The turn got its answer: whole, or cut at the output limit the scenario set (a small
    model rambles; that is the model's, and Continue resumes it)."""
    return done.returncode == 0 or (done.returncode == 2 and "reached the output limit" in
                                    done.stderr and bool(done.stdout.strip()))


def notes(exchanges: int, seed: int) -> list[dict[str, str]]:
    """A conversation of `exchanges` notes and short answers, about 140 tokens each: 24 make
    about 3,300, what a window assumed at 8,192 takes whole and a 2,048 one does not."""
    rng = random.Random(seed)
    out = []
    for n in range(exchanges):
        said = " ".join(rng.choice(WORDS) for _ in range(110))
        out += [{"role": "user", "content": f"Note {n}: {said}."},
                {"role": "assistant", "content": f"Noted ({n}): line numbers kept, column "
                                                 "errors reported by the lexer."}]
    return out


def imported(home: Path, project: Path, messages: list[dict[str, str]]) -> str:
    """A conversation made by `import` (no request to any server); its id."""
    source = project.parent / f"{project.name}-import.json"
    project.mkdir(parents=True, exist_ok=True)
    source.write_text(json.dumps({"messages": messages}))
    done = cli(home, "import", project, source)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def headline(done: subprocess.CompletedProcess[str]) -> str:
    """`workbench context`'s first line: model, mode, window (and where it came from)."""
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0]


def new_conversation(home: Path, project: Path, text: str) -> str:
    done = cli(home, "send", project, "--new", *flags("--max-tokens", 48), text)
    assert answered(done), done.stderr
    return done.stderr.split()[1]  # "conversation <id>"


def test_send_answers(home: Path, tmp_path: Path) -> None:
    """A send answers, and its new conversation is titled from its first words at once: no
    title request waits behind the answer (a small model's titles were sentences, 1-3 s)."""
    started = time.monotonic()
    done = cli(home, "send", tmp_path / "p", "--new", *flags("--max-tokens", 48),
               "Say hello in one short sentence.")
    title = re.search(r"titled “(.*)”", done.stderr)
    print(f"\nsend: exit {done.returncode} in {time.monotonic() - started:.1f} s: "
          f"{done.stdout.strip()[:80]!r}; titled {title.group(1) if title else None!r}")
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    assert title and title.group(1) == "Say hello in one short sentence.", done.stderr
    PROVED.append(f"a send answers; its title is its first words ({title.group(1)!r}), "
                  "asked of no model")


def test_the_window_is_right_before_the_first_turn(tmp_path: Path) -> None:
    """llama-cpp-python states its window nowhere (/v1/models, no /props): requests were built
    for the 8,192 tokens assumed until the first refusal. One count of a prompt over 8,192
    tokens, which it refuses before reading it, naming 2,048, learns it before anything is
    sent: a 3,300-token conversation's first turn is built within it and never refused (the
    server's log has no 400 for it). The same model name at the tools server gets that
    server's window; a window the user states wins."""
    from core.context.server_window import WindowCount, count_window

    home, project = tmp_path / "home", tmp_path / "p"  # nothing learned yet
    conv = imported(home, project, notes(24, seed=5))
    counting = ServerLog()
    before = headline(cli(home, "context", project, "-c", conv, *flags("--max-tokens", 48)))
    asked = counting.statuses()
    tools = headline(cli(home, "context", project, "-c", conv, "--model", MODEL, "--api-base",
                         TOOLS_URL, "--max-tokens", "48"))
    stated = headline(cli(home, "context", project, "-c", conv,
                          *flags("--max-tokens", 48, "--context-window", 1500)))
    turn = ServerLog()
    done = cli(home, "send", project, "-c", conv, *flags("--max-tokens", 48),
               "Which note came first?")
    sent = turn.statuses()
    started = time.monotonic()
    again = count_window(URL, MODEL)  # the count itself, timed from here
    refused_ms = 1000 * (time.monotonic() - started)
    print(f"\nwindow before the first turn: {before}\n  the server's answers to the "
          f"counts: {asked}; the tools server: {tools}\n  stated: {stated}\n  the first "
          f"turn: exit {done.returncode}, the server's answers {sent}\n  the count refused "
          f"in {refused_ms:.0f} ms: {again}")
    assert "window 2,048 (provider)" in before and 400 in asked, before
    assert "window 4,096 (provider)" in tools, tools
    assert "window 1,500 (override)" in stated, stated
    assert answered(done), done.stderr
    if LOG:
        assert sent and 400 not in sent, f"the first turn was refused: {sent}"
    assert again == WindowCount(window=2048)
    PROVED.append(f"the window before the first turn: 2,048 at the chat server, 4,096 at the "
                  f"tools server (same model name), from one count each (refused in "
                  f"{refused_ms:.0f} ms); a 3,300-token conversation's first turn built within "
                  f"it, never refused {sent if LOG else '(no server log to check)'}; "
                  "--context-window 1,500 wins")


def test_a_model_s_title_is_a_few_words(home: Path, tmp_path: Path) -> None:
    """Asked for (`--title-model`), the model titles the conversation: its first line, cut to
    about six words however long a sentence a 135M model writes."""
    done = cli(home, "send", tmp_path / "p", "--new", "--title-model",
               *flags("--max-tokens", 32), "Explain what a lexer does, in one sentence.")
    title = re.search(r"titled “(.*)”", done.stderr)
    print(f"\nmodel title: exit {done.returncode}: {title.group(1) if title else None!r}")
    assert answered(done) and title, done.stderr
    words = title.group(1).split()
    assert "\n" not in title.group(1) and 0 < len(words) <= 8, title.group(1)
    PROVED.append(f"a model's title (--title-model) is a few words: {title.group(1)!r}")


def test_fifteen_growing_turns_without_a_failed_turn(home: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    project = tmp_path / "p"
    conv = new_conversation(home, project, message(0, rng))
    failed, percents = [], []
    for turn in range(1, 15):
        done = cli(home, "send", project, "-c", conv, *flags("--max-tokens", 64),
                   message(turn, rng))
        if not answered(done):
            failed.append((turn, done.stderr.strip().splitlines()[-1:]))
        shown = cli(home, "context", project, "-c", conv, *flags("--max-tokens", 64))
        line = next(x for x in shown.stdout.splitlines() if x.startswith("used "))
        percents.append(line.split("(")[1].split(")")[0])
    shown = cli(home, "context", project, "-c", conv, *flags("--max-tokens", 64))
    print(f"\n15 turns: failed {failed or 'none'}; meter after each: {', '.join(percents)}")
    print("\n".join(x for x in shown.stdout.splitlines()[:4]))
    assert not failed
    assert "2,048" in shown.stdout and "window" in shown.stdout  # the learned window
    # The meter's estimate against the server's own count of the same request.
    as_json = cli(home, "context", project, "-c", conv, *flags("--max-tokens", 64, "--json"))
    data = json.loads(as_json.stdout)
    ours = data["report"]["provider_estimate"]
    theirs = server_count(data["messages"], data["tools"])
    off = 100 * (ours - theirs) / theirs
    print(f"meter {ours:,} tokens, server {theirs:,}: {off:+.1f}%")
    assert abs(ours - theirs) <= 0.1 * theirs
    PROVED.append(f"15 growing turns at a 2,048-token window, none failed; the meter's count "
                  f"{off:+.1f}% from the server's own")


def test_compact_keeps_a_digest_when_the_model_s_summary_is_refused(home: Path,
                                                                   tmp_path: Path) -> None:
    """A summary the model cannot write is refused with the log untouched, and the
    conversation still goes on within the window: the no-LLM digest carries what it leaves
    out. (A summary a model can write: the next scenario.)"""
    rng = random.Random(11)
    project = tmp_path / "p"
    conv = new_conversation(home, project, message(0, rng))
    for turn in range(1, 9):
        cli(home, "send", project, "-c", conv, *flags("--max-tokens", 48), message(turn, rng))
    log = next((project / ".workbench" / "conversations").glob(f"{conv}*/messages.jsonl"))
    before = log.read_bytes()
    done = cli(home, "compact", project, "-c", conv, *flags("--max-tokens", 512))
    print(f"\ncompact: exit {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}")
    # SmolLM2-135M writes no summary the product keeps (it was refused in every run so
    # far); one it kept would be checked as the next scenario checks the loopback's
    refused = done.returncode != 0
    if refused:
        assert done.returncode == 2 and "Nothing was changed" in done.stderr
        assert log.read_bytes() == before
    else:
        summary = json.loads(log.read_bytes().splitlines()[-1])
        assert summary.get("kind") == "summary" and "## " in summary["content"]
    view = json.loads(cli(home, "context", project, "-c", conv, *flags(), "--json").stdout)
    decisions = [e["decision"] for e in view["report"]["entries"]]
    carried = {d for d in decisions if d in ("digested", "summarized")}
    print(f"compact: then the request carries {len(decisions)} entries: "
          f"{ {d: decisions.count(d) for d in sorted(set(decisions))} }")
    assert carried, "the conversation outgrew the window, yet nothing digests it"
    after = cli(home, "send", project, "-c", conv, *flags("--max-tokens", 48), "One more note?")
    print(f"compact: the next send exit {after.returncode}")
    assert answered(after), after.stderr
    PROVED.append(
        (f"the model's summary refused, the log unchanged; the digest carries "
         f"{decisions.count('digested')} entries and the next turn is answered") if refused
        else "the model's summary was kept (this run did not see a refused one)")


def test_a_summary_a_model_can_write_is_kept_and_the_real_model_reads_it(tmp_path: Path
                                                                         ) -> None:
    """One accepted summary: the 135M model writes none the product keeps, so a summary model
    that can write one does it, the loopback server (tests/helpers/fake_llm.py) at its own
    address (a summary model shares the chat model's address: `compact` is pointed there).
    The conversation was made with the real server, and the real model then answers a turn
    whose request carries the summary in place of what it covers."""
    from tests.helpers.fake_llm import Answer, FakeLLMServer, summary_text

    home, project = tmp_path / "home", tmp_path / "p"
    conv = imported(home, project, notes(24, seed=9))
    log = next((project / ".workbench" / "conversations").glob(f"{conv}*/messages.jsonl"))
    with FakeLLMServer() as writer:
        writer.script(*[Answer(summary_text("Notes on the parser and the lexer"))] * 6)
        done = cli(home, "compact", project, "-c", conv, "--model", "openai/summary-writer",
                   "--api-base", writer.url, "--max-tokens", 512)
        asked = len(writer.requests)
    last = json.loads(log.read_bytes().splitlines()[-1])
    print(f"\naccepted summary: compact exit {done.returncode} after {asked} request(s): "
          f"{(done.stdout + done.stderr).strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert last.get("kind") == "summary" and "Notes on the parser" in last["content"]
    view = json.loads(cli(home, "context", project, "-c", conv,
                          *flags("--max-tokens", 48, "--json")).stdout)
    decisions = [e["decision"] for e in view["report"]["entries"]]
    sent = json.dumps(view["messages"])
    turn = cli(home, "send", project, "-c", conv, *flags("--max-tokens", 48),
               "What were the notes about?")
    print(f"accepted summary: the real model's request carries it: "
          f"{'Notes on the parser' in sent} ({decisions.count('summarized')} entries "
          f"summarized); its answer: exit {turn.returncode}, {turn.stdout.strip()[:80]!r}")
    assert "Notes on the parser" in sent and "summarized" in decisions
    assert answered(turn), turn.stderr
    PROVED.append(f"a summary a model can write (the loopback server's) is kept; the real "
                  f"model answers with it standing for {decisions.count('summarized')} entries")


def test_a_compact_during_a_send_cuts_neither(tmp_path: Path) -> None:
    """The window's /compact while an answer streams, in one process: the server ends a
    running stream when another request arrives, so the summary waits its turn."""
    from tests.real.scenarios import send_and_compact

    server = ServerLog()
    done = send_and_compact(tmp_path / "p", MODEL, URL, max_tokens=160, summary_tokens=512)
    cut = server.cut()
    print(f"\ncompact during a send: send {done.send_status} ({len(done.answer)} characters"
          f"{'; ' + done.send_error if done.send_error else ''}); summary {done.compact_status}"
          f": {done.compact_message[:160]}; the server's answers {server.statuses()}, streams "
          f"it ended {cut if LOG else '(no server log)'}")
    assert done.answer and "interrupted" not in done.send_error.lower()
    assert done.send_status == "ok" or "output limit" in done.send_error
    # the model's summary may be refused for what it says, never for a cut request
    assert done.compact_status in ("ok", "failed")
    assert not any(w in done.compact_message.lower()
                   for w in ("interrupted", "connection", "http 5")), done.compact_message
    assert cut == 0, server.text()[-2000:]
    whole = "ended by the model" if done.send_status == "ok" else "cut at its output limit"
    PROVED.append(f"a /compact during a send: the answer whole ({len(done.answer)} characters, "
                  f"{whole}), the summary asked after it ({done.compact_status}: "
                  f"{'kept' if done.compact_status == 'ok' else 'refused for what it says'}), "
                  f"no stream ended by the server {server.statuses()}")


def test_stop_then_continue(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    conv = new_conversation(home, project, "Hello.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env.update(XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               XDG_STATE_HOME=str(home / "state"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "send", str(project), "-c", conv,
         *map(str, flags("--max-tokens", 400)), "Write a long story about a lighthouse."],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.read(40)  # some of the answer has arrived
    proc.send_signal(signal.SIGINT)  # Ctrl+C: Stop
    out, err = proc.communicate(timeout=120)
    assert first and proc.returncode == 130, err
    done = cli(home, "continue", project, "-c", conv, *flags("--max-tokens", 64))
    exported = cli(home, "export", project, "-c", conv, "--format", "jsonl")
    last = json.loads(exported.stdout.splitlines()[-1])
    print(f"\nstop + continue: stopped after {len(first)} bytes; continue exit "
          f"{done.returncode}; last entry continues {bool(last.get('continues'))}")
    assert done.returncode in (0, 2), done.stderr  # 2: the continuation hit its output limit
    assert last.get("continues") and last.get("content")
    PROVED.append(f"Stop after {len(first)} bytes, then Continue: one answer, its parts linked")


def test_an_agent_turn_completes_a_tool_round(home: Path, tmp_path: Path) -> None:
    """llama-cpp-python's chatml-function-calling: the tools reach the model (tool_choice),
    the product runs its call and logs the result, and the request after it (the call's
    message with content "", the result) is answered: the model's next message, a call or
    text, arrives. The streamed tool round it refuses (an empty 200, a hung-up or reset
    connection, or a dead kept-alive one) is asked whole, and no 500 is met.

    What this server and model cannot show: an answer quoting the file. llama-cpp-python
    0.3.36's chatml-function-calling template renders no `tool` message (the result never
    reaches the model; its arguments come back HTML-escaped too), and SmolLM2-135M named
    notes.txt in none of 29 first calls (four wordings) and, shown a result as a user message,
    called the tool again 6 times of 6 instead of answering. A 135M model does not always call
    a tool at all: three tries."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "notes.txt").write_text("first line: the build is green\n")
    server = ServerLog(TOOLS_LOG)
    rounds: list[str] = []
    for attempt in range(3):
        done = cli(home, "send", project, "--new", "--mode", "agent", "--approve", "never",
                   "--step-limit", "2", "--model", MODEL, "--api-base", TOOLS_URL,
                   "--max-tokens", "128", "Read notes.txt and tell me its first line.")
        assert "Traceback" not in done.stderr and "HTTP 500" not in done.stderr, done.stderr
        conv = done.stderr.split()[1]
        entries = [json.loads(x) for x in cli(home, "export", project, "-c", conv, "--format",
                                              "jsonl").stdout.splitlines()]
        calls = {c["id"] for e in entries if e.get("role") == "assistant"
                 for c in e.get("tool_calls") or []}
        results = [n for n, e in enumerate(entries) if e.get("role") == "tool"]
        logged = bool(results) and all(entries[n].get("tool_call_id") in calls
                                       and entries[n].get("content") for n in results)
        after = [e for e in entries[results[0] + 1:] if e.get("role") == "assistant"
                 and not e.get("error")] if results else []
        read = any("the build is green" in str(entries[n].get("content")) for n in results)
        said = " ".join(str(e.get("content") or "") for e in after)
        rounds.append(f"try {attempt + 1}: exit {done.returncode}, {len(results)} tool "
                      f"result(s) logged{', notes.txt read' if read else ''}"
                      f"{', the request after them answered' if after else ''}"
                      f"{', the answer quotes it' if 'green' in said else ''}")
        if logged and after:
            break
    statuses = server.statuses()
    print(f"\nagent turn: {'; '.join(rounds)}; the tools server's answers {statuses}")
    assert logged and after, "no tool round completed"
    assert 500 not in statuses
    PROVED.append(f"an agent tool round with chatml-function-calling: {rounds[-1]}; the "
                  f"server answered {len(statuses)} requests, none with a 500 (an answer "
                  "quoting the file: not on this server, see the scenario)")


def test_export_then_import_round_trip(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    conv = new_conversation(home, project, "Name three colours.")
    exported = cli(home, "export", project, "-c", conv, "--format", "openai")
    path = tmp_path / "c.json"
    path.write_text(exported.stdout)
    imported = cli(home, "import", project, path)
    assert imported.returncode == 0, imported.stderr
    again = cli(home, "export", project, "-c", imported.stdout.strip().splitlines()[-1],
                "--format", "openai")
    assert json.loads(again.stdout)["messages"] == json.loads(exported.stdout)["messages"]
    PROVED.append("export then import gives back the same messages")

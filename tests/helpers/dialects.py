"""Agent sessions that tests and the compaction benchmark make themselves, one per dialect of
shell and tool: zsh on macOS (Claude Code's `Exit code N` header, no exit code field), progress
output rewritten with carriage returns and coloured with ANSI codes, causes nested in a test
runner's report (Go's `Output:`, pytest's `E   `, cargo's `Caused by:`, git's hints), and
PowerShell, cmd, fish and dash.

A session is OpenAI-format messages (as imported: no exit codes, no statuses): requests with a
rule, files read (long outputs), commands that went well, and the dialect's failing commands in
a random order, each followed by what the model made of it; each output as one terminal or
another shows it (`as_shown`: colours, a spinner's carriage returns, Windows' line ends).
Each failing command comes with the words a digest must keep to name its cause.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

ESC = "\x1b"
RED, BOLD, RESET, CLEAR = f"{ESC}[31m", f"{ESC}[1m", f"{ESC}[0m", f"{ESC}[2K"


def _go_test(cause: str) -> str:
    passing = "".join(f"=== RUN   TestStep{k}\n--- PASS: TestStep{k} (0.0{k % 9}s)\n"
                      for k in range(30))
    return (f"{passing}=== RUN   TestRebaseKeepsCheckpoints\n"
            "    rebase_test.go:45: git rebase failed: exit status 128\n"
            f"        Output: {cause}\n"
            "--- FAIL: TestRebaseKeepsCheckpoints (0.04s)\n" + passing.replace("Step", "Tail")
            + "FAIL\nFAIL\tentire.io/cli/cmd/entire/cli/strategy\t1.912s\nFAIL\n")


def _pytest(cause: str) -> str:
    dots = "." * 60
    return (f"{dots}F{dots}                                [100%]\n"
            "=================================== FAILURES ===================================\n"
            "_______________________________ test_load_session _______________________________\n\n"
            "    def test_load_session(tmp_path):\n"
            ">       session = load(FIXTURES / 'session.json')\n\n"
            "tests/test_sessions.py:41: \n"
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
            "    def load(path):\n>       with open(path) as f:\n"
            f"E       {cause}\n\n"
            "src/sessions.py:12: FileNotFoundError\n"
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_sessions.py::test_load_session - FileNotFoundError: [Errno 2] N...\n"
            "1 failed, 120 passed in 3.41s\n")


def _cargo(cause: str) -> str:
    building = "".join(f"{ESC}[1m{ESC}[32m   Compiling{RESET} dep{k} v0.{k}.0\n"
                       for k in range(25))
    return (building + f"{BOLD}{RED}error{RESET}{BOLD}: failed to load manifest for workspace "
            "member `/w/crates/core`\n\nCaused by:\n  failed to read `/w/crates/core/Cargo.toml`"
            f"\n\nCaused by:\n  {cause}\n")


def _progress(steps: list[str], last: str) -> str:
    return "\r".join(steps) + "\r" + last


# Each dialect: (command, output, the words that name the cause, what the model said).
Episode = tuple[str, str, str, str]
DIALECTS: dict[str, list[Episode]] = {
    "zsh on macOS": [
        ("staticcheck ./...", "Exit code 127\n(eval):1: command not found: staticcheck\n",
         "command not found: staticcheck", "staticcheck is not installed; go vet instead."),
        ("python -m pytest tests", "Exit code 127\nzsh:1: command not found: python\n",
         "command not found: python", "macOS has python3 only; using it."),
        ("./scripts/release.sh --dry-run",
         "Exit code 126\nzsh:1: permission denied: ./scripts/release.sh\n",
         "permission denied: ./scripts/release.sh", "The script is not executable; chmod +x."),
        ("golangci-lint run ./...", "Exit code 127\n(eval):1: command not found: golangci-lint\n",
         "command not found: golangci-lint", "No golangci-lint here; running go vet."),
        ("source .venv/bin/activate && pytest -q",
         "Exit code 127\n(eval):source:1: no such file or directory: .venv/bin/activate\n",
         "no such file or directory: .venv/bin/activate", "There is no venv yet; creating one."),
        ("ls logs/*.jsonl", "Exit code 1\n(eval):1: no matches found: logs/*.jsonl\n",
         "no matches found: logs/*.jsonl", "No logs were written yet."),
        ("brew install protobuf@3",
         "Exit code 1\nError: No available formula with the name \"protobuf@3\".\n"
         "Did you mean protobuf@21?\n",
         "No available formula with the name", "The formula is protobuf@21."),
    ],
    "progress bars": [
        ("git rebase -i origin/main",
         _progress([f"Rebasing ({k}/4)" for k in range(1, 3)],
                   "error: Unable to create '/Users/alex/cli/.git/index.lock': File exists.\n\n"
                   "Another git process seems to be running in this repository, e.g.\n"
                   "an editor opened by 'git commit'. Please make sure all processes\n"
                   "are terminated then try again.\n"),
         "index.lock': File exists", "A stale index.lock; removing it."),
        ("pip install -r requirements.txt",
         _progress([f"Collecting numpy==1.{k}  Downloading ({k * 10}%)" for k in range(8)],
                   f"{RED}ERROR: Could not find a version that satisfies the requirement "
                   f"torch==1.4.0 (from versions: 2.2.0, 2.3.1){RESET}\n"
                   f"{RED}ERROR: No matching distribution found for torch==1.4.0{RESET}\n"),
         "satisfies the requirement torch==1.4.0", "torch 1.4 is too old for this Python."),
        ("npm install leftpadx",
         _progress([f"⠙ idealTree:{k}" for k in range(12)],
                   f"{CLEAR}{RED}npm ERR!{RESET} code E404\n{RED}npm ERR!{RESET} 404 Not Found - "
                   "GET https://registry.npmjs.org/leftpadx - Not found\n"),
         "404 Not Found - GET https://registry.npmjs.org/leftpadx", "The package is leftpad."),
        ("cargo build --release",
         _progress([f"    Building [{'=' * k}>{' ' * (20 - k)}] {k}/40: serde" for k in range(20)],
                   f"{BOLD}{RED}error[E0425]{RESET}{BOLD}: cannot find value `cfg` in this "
                   f"scope{RESET}\n  --> src/main.rs:14:9\n"),
         "cannot find value `cfg` in this scope", "cfg was renamed to config."),
        ("git clone https://github.com/entireio/cli.git /tmp/cli",
         "Cloning into '/tmp/cli'...\n" + _progress(
             [f"Receiving objects:  {k}% ({k * 30}/3000)" for k in range(0, 60, 3)],
             "error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly\n"
             "fatal: early EOF\nfatal: fetch-pack: invalid index-pack output\n"),
         "RPC failed; curl 92", "The network dropped; cloning shallow."),
    ],
    "nested causes": [
        ("go test -v ./cmd/entire/cli/strategy/...", _go_test("fatal: invalid upstream 'main'"),
         "invalid upstream 'main'", "The test repo has no main branch; creating it."),
        ("go test -v -run TestPush ./...",
         _go_test("error: src refspec feature does not match any").replace("Rebase", "Push"),
         "src refspec feature does not match any", "The branch has no commit yet."),
        ("go test ./internal/store/...",
         "--- FAIL: TestLoadSnapshot (0.00s)\n    snapshot_test.go:31: open testdata/snap.json: "
         "no such file or directory\nFAIL\nFAIL\tentire.io/cli/internal/store\t0.012s\nFAIL\n",
         "open testdata/snap.json: no such file or directory", "testdata was never added."),
        ("pytest -q tests/test_sessions.py",
         _pytest("FileNotFoundError: [Errno 2] No such file or directory: "
                 "'tests/fixtures/session.json'"),
         "No such file or directory: 'tests/fixtures/session.json'",
         "The fixture was never committed; adding it."),
        ("cargo check --workspace", _cargo("No such file or directory (os error 2)"),
         "No such file or directory (os error 2)", "crates/core was deleted; fixing members."),
        ("git push origin feature",
         "To github.com:entireio/cli.git\n ! [rejected]        feature -> feature (fetch first)\n"
         "error: failed to push some refs to 'github.com:entireio/cli.git'\n"
         "hint: Updates were rejected because the remote contains work that you do\n"
         "hint: not have locally.\n",
         "failed to push some refs", "The remote moved; pulling first."),
        ("./gradlew test",
         "> Task :app:test FAILED\n\nFAILURE: Build failed with an exception.\n\n"
         "* What went wrong:\nExecution failed for task ':app:test'.\n"
         "> There were failing tests.\n\nCaused by: java.net.ConnectException: Connection "
         "refused (localhost:5432)\n",
         "java.net.ConnectException: Connection refused", "Postgres is not running."),
    ],
    "PowerShell, cmd, fish": [
        ("staticcheck ./...",
         "staticcheck : The term 'staticcheck' is not recognized as the name of a cmdlet, "
         "function, script file, or operable program. Check the spelling of the name, or if a "
         "path was included, verify that the path is correct and try again.\nAt line:1 char:1\n"
         "+ staticcheck ./...\n+ ~~~~~~~~~~~\n    + CategoryInfo          : ObjectNotFound: "
         "(staticcheck:String) [], CommandNotFoundException\n"
         "    + FullyQualifiedErrorId : CommandNotFoundException\n",
         "The term 'staticcheck' is not recognized", "staticcheck is missing on Windows."),
        ("pytest -q",
         "pytest: The term 'pytest' is not recognized as a name of a cmdlet, function, script "
         "file, or executable program.\nCheck the spelling of the name, or if a path was "
         "included, verify that the path is correct and try again.\n",
         "The term 'pytest' is not recognized", "Using python -m pytest."),
        ("make test", "'make' is not recognized as an internal or external command,\n"
         "operable program or batch file.\n",
         "'make' is not recognized", "No make on Windows; running the steps by hand."),
        ("cd build\\out && dir", "The system cannot find the path specified.\n",
         "The system cannot find the path specified", "The build folder is not made yet."),
        ("rg TODO src", "fish: Unknown command: rg\nfish: \nrg TODO src\n^~^\n",
         "Unknown command: rg", "ripgrep is missing; grep -rn instead."),
        ("golangci-lint run", "sh: 1: golangci-lint: not found\n",
         "golangci-lint: not found", "Not installed in the container either."),
    ],
}
OK_COMMANDS = ("go build ./...", "git status --short", "python3 -m pytest -q tests/unit",
               "npm run lint", "cargo fmt --check", "go vet ./...", "make fmt")


ERROR_WORDS = re.compile(r"rror|fatal|FAIL|not found|recognized|Unknown|denied|Caused|ERR!")


STYLES = 4


def as_shown(style: int, output: str) -> str:
    """`output` as one terminal or another prints it (`style` < STYLES): as is, its error lines
    coloured, a spinner's frames rewritten by carriage returns before it, or with Windows' line
    ends."""
    if style == 1:
        return "\n".join(f"{RED}{line}{RESET}" if ERROR_WORDS.search(line) else line
                         for line in output.split("\n"))
    if style == 2:
        return "".join(f"{frame} working…\r" for frame in "⠋⠙⠹⠸") + output
    if style == 3:
        return output.replace("\n", "\r\n")
    return output


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}}]}


def _work(rng: random.Random, n: int, size: int) -> list[dict[str, Any]]:
    """A stretch of ordinary work: a file read (a long output) or a command that went well."""
    if rng.random() < 0.6:
        path = f"/Users/alex/cli/cmd/entire/cli/pkg{n % 7}/file_{n}.go"
        body = "".join(f"{k:>6}→\tfunc step{n}_{k}() error {{ return nil }}\n"
                       for k in range(size // 45))
        return [_call(f"r{n}", "Read", {"file_path": path}),
                {"role": "tool", "tool_call_id": f"r{n}", "content": body},
                {"role": "assistant", "content": f"file_{n}.go holds step {n}; it looks right."}]
    command = rng.choice(OK_COMMANDS)
    body = "".join(f"ok  \tentire.io/cli/pkg{k}\t0.{k}s\n" for k in range(size // 200))
    return [_call(f"k{n}", "Bash", {"command": command}),
            {"role": "tool", "tool_call_id": f"k{n}", "content": body}]


def dialect_session(dialect: str, seed: int = 0, work: int = 40,
                    size: int = 4000) -> list[dict[str, Any]]:
    """A session of `dialect`'s failing commands in a random order among `work` stretches of
    ordinary work (each about `size` characters of output)."""
    rng = random.Random(f"{dialect}/{seed}")
    episodes = DIALECTS[dialect][:]
    rng.shuffle(episodes)
    spots = sorted(rng.sample(range(work), len(episodes)))
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Make the {dialect} build pass. Never push to main; keep "
                                    "the public API as it is."}]
    for n in range(work):
        if n and n % 12 == 0:
            out.append({"role": "user", "content": f"Carry on with part {n // 12}; do not "
                                                   f"touch the fixtures in part {n}."})
        out += _work(rng, n, size)
        while spots and spots[0] == n:
            spots.pop(0)
            command, output, _, said = episodes.pop()
            cid = f"x{n}_{len(spots)}"
            out += [_call(cid, "Bash", {"command": command}),
                    {"role": "tool", "tool_call_id": cid, "content": as_shown(rng.randrange(STYLES), output)},
                    {"role": "assistant", "content": said}]
    out.append({"role": "user", "content": "Sum up what failed and why."})
    return out


def dialect_sessions(seeds: int = 3) -> dict[str, list[dict[str, Any]]]:
    """Every dialect's sessions, `seeds` of each, by name."""
    return {f"{dialect} #{seed}": dialect_session(dialect, seed, work=30 + 10 * seed)
            for dialect in DIALECTS for seed in range(seeds)}

"""Reading a command's failure from its output: what the table recognizes, what it leaves."""

from __future__ import annotations

import pytest

from core.context.failures import LINE_CHARS, core_command, failure, screen
from tests.helpers.dialects import DIALECTS, STYLES, as_shown

PYTEST = """\
F                                                                        [100%]
=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5

test_calc.py:5: AssertionError
=========================== short test summary info ============================
FAILED test_calc.py::test_add - assert -1 == 5
1 failed in 0.02s
"""

FAILING = [
    ("python3 -m mypy reproduce.py",
     'reproduce.py:6: error: Name "UNDEFINED" is not defined  [name-defined]\n'
     "Found 1 error in 1 file (checked 1 source file)\n",
     'reproduce.py:6: error: Name "UNDEFINED" is not defined [name-defined]'),
    ("pytest -q", PYTEST, "FAILED test_calc.py::test_add - assert -1 == 5"),
    ("go test ./...", "=== RUN   TestX\n--- FAIL: TestX (0.00s)\n    x_test.go:9: got 1\n"
     "FAIL\nFAIL\texample.com/x\t0.01s\n", "--- FAIL: TestX (0.00s)"),
    ("go build ./... 2>&1 | head -50", "# example.com/x\ncmd/x.go:8:15: undefined: cpID\n",
     "cmd/x.go:8:15: undefined: cpID"),
    ("cargo build", "   Compiling x v0.1.0\nerror[E0425]: cannot find value `y` in this scope\n"
     "  --> src/main.rs:2:5\n", "error[E0425]: cannot find value `y` in this scope"),
    ("npx tsc", "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
     "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'."),
    ("ruff check .", "x.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n",
     "x.py:1:8: F401 [*] `os` imported but unused"),
    ("git log main..nope", "fatal: ambiguous argument 'main..nope': unknown revision or path\n",
     "fatal: ambiguous argument 'main..nope': unknown revision or path"),
    ("git merge feature", "Auto-merging a.py\nCONFLICT (content): Merge conflict in a.py\n"
     "Automatic merge failed; fix conflicts and then commit the result.\n",
     "CONFLICT (content): Merge conflict in a.py"),
    ("npm test", "> x@1.0.0 test\nnpm ERR! Test failed.  See above for more details.\n",
     "npm ERR! Test failed. See above for more details."),
    ("make", "cc -o x x.c\nmake: *** [Makefile:2: x] Error 1\n", "make: *** [Makefile:2: x] Error 1"),
    ("python3 tool.py", 'Traceback (most recent call last):\n  File "tool.py", line 3, in <module>\n'
     "    main()\nKeyError: 'path'\n", "KeyError: 'path'"),
    ("frobnicate --all", "bash: frobnicate: command not found\n",
     "bash: frobnicate: command not found"),
    ("cargo test", "running 1 test\nthread 'tests::it_parses' panicked at src/lib.rs:9:5:\n"
     "assertion failed: parse(\"x\")\n", "thread 'tests::it_parses' panicked at src/lib.rs:9:5:"),
    ("pip install ./pkg", "error: Failed to spawn: `setup.py`\n  Caused by: No such file or "
     "directory (os error 2)\n", "Caused by: No such file or directory (os error 2)"),
    # Claude Code's Bash tool puts the exit code in the output, and no field carries it
    ("mise run test 2>&1 | tail -3", "Exit code 1\nok  \tx/a\t(cached)\nFAIL\n[test] ERROR task failed",
     "[test] ERROR task failed"),
]


@pytest.mark.parametrize(("command", "output", "line"), FAILING,
                         ids=[c.split()[0] + "-" + str(n) for n, (c, _, _) in enumerate(FAILING)])
def test_a_failure_is_read_from_the_output_without_an_exit_code(command: str, output: str,
                                                                 line: str) -> None:
    found = failure(output, command=command)
    assert found is not None, "a failure the output states"
    assert line in found.lines
    assert all(len(x) <= LINE_CHARS for x in found.lines)


@pytest.mark.parametrize(("command", "output"), [
    ("pytest -q", "....                                                 [100%]\n4 passed in 0.03s\n"),
    ("go test ./...", "ok  \texample.com/x\t0.01s\n"),
    ("ls", "error_handling.py\nREADME.md\n"),
    # the output of a search or a file is data: its "error:" lines are not the command's
    ("grep -rn 'error:' src", "src/log.py:3:    print('error: disk full')\n"
     "src/run.py:9:ValueError: bad\n"),
    ("cat trace.txt", "Traceback (most recent call last):\nValueError: old one\n"),
    ("git diff", "-    raise RuntimeError('x')\n+    return None\n"),
])
def test_output_that_only_mentions_errors_is_not_a_failure(command: str, output: str) -> None:
    assert failure(output, command=command) is None


def test_an_exit_code_decides_unless_a_pipe_hides_it() -> None:
    assert failure("anything", exit_code=0, command="pytest") is None  # believed
    piped = failure(PYTEST, exit_code=0, command="pytest -q | tail -5")  # tail's exit code
    assert piped is not None and "FAILED test_calc.py::test_add - assert -1 == 5" in piped.lines
    quiet = failure("no such thing here\nlast words", exit_code=2, command="./check.sh")
    assert quiet == ("exit 2", ("last words",))  # no signature: its last line
    grep = failure("", exit_code=1, command="grep -q x file")
    assert grep is not None and grep.kind == "exit 1"


def test_the_first_and_last_naming_lines_are_kept_cut_to_length() -> None:
    out = "\n".join(f"src/m{k}.go:{k}:1: undefined: name{k} " + "x" * 300 for k in range(50))
    found = failure(out, command="go build ./...")
    assert found is not None and len(found.lines) == 2
    assert found.lines[0].startswith("src/m0.go:0:1: undefined: name0")
    assert found.lines[1].startswith("src/m49.go:49:1: undefined: name49")
    assert all(len(x) == LINE_CHARS and x.endswith("…") for x in found.lines)


def test_a_huge_output_is_read_at_its_head_and_tail() -> None:
    middle = "ok line\n" * 200_000
    found = failure(middle + "FAILED tests/test_z.py::test_q - boom\n", command="pytest")
    assert found is not None and found.lines == ("FAILED tests/test_z.py::test_q - boom",)


def test_the_same_command_shaped_differently_has_one_core() -> None:
    assert core_command("go build ./... 2>&1 | head -100") == "go build ./..."
    assert core_command("go build ./...") == "go build ./..."
    assert core_command("pytest -q  tests") == "pytest -q tests"


# --- every dialect of shell and tool: the line that names the cause is kept --------------------

EPISODES = [(dialect, command, output, cause)
            for dialect, episodes in DIALECTS.items()
            for command, output, cause, _ in episodes]


@pytest.mark.parametrize(("dialect", "command", "output", "cause"), EPISODES,
                         ids=[f"{d.split()[0]}-{c.split()[0]}" for d, c, _, _ in EPISODES])
def test_every_dialect_names_the_cause_of_its_failure(dialect: str, command: str, output: str,
                                                      cause: str) -> None:
    for style in range(STYLES):  # coloured, behind a spinner, with Windows' line ends
        found = failure(as_shown(style, output), command=command)
        assert found is not None, f"a {dialect} failure the output states"
        assert any(cause in line for line in found.lines), (style, found)
        assert len(found.lines) <= 2 and all(len(x) <= LINE_CHARS for x in found.lines)
        assert not any("\x1b" in x or "\r" in x for x in found.lines)


def test_zsh_names_the_missing_command_after_the_colon_and_the_kind_says_shell() -> None:
    found = failure("Exit code 127\n(eval):1: command not found: staticcheck\n",
                    command="staticcheck ./...")
    assert found == ("exit 127, shell", ("(eval):1: command not found: staticcheck",))
    found = failure("zsh:1: command not found: python\n", exit_code=127, command="python x.py")
    assert found == ("exit 127, shell", ("zsh:1: command not found: python",))
    # a data command's output is not read, but the shell's complaint about it is
    found = failure("zsh: no matches found: logs/*.jsonl\n", exit_code=1, command="ls logs/*.jsonl")
    assert found == ("exit 1, shell", ("zsh: no matches found: logs/*.jsonl",))


def test_a_progress_line_is_read_as_the_terminal_shows_it() -> None:
    out = ("Rebasing (1/4)\rRebasing (2/4)\rerror: Unable to create '/r/.git/index.lock': "
           "File exists.\n\nAnother git process seems to be running in this repository.\n")
    found = failure(out, exit_code=1, command="git rebase -i main")
    assert found == ("exit 1, git", ("error: Unable to create '/r/.git/index.lock': File exists.",))
    assert screen("50%\r100%\r\n\x1b[1m\x1b[31merror\x1b[0m: x\rdone\r  \n") == "100%\ndone\n"


def test_a_cause_nested_in_a_runners_report_is_kept_beside_what_failed() -> None:
    go = ("=== RUN   TestRebase\n    rebase_test.go:45: git rebase failed: exit status 128\n"
          "        Output: fatal: invalid upstream 'main'\n--- FAIL: TestRebase (0.03s)\n"
          "FAIL\nFAIL\texample.com/x\t0.05s\n")
    assert failure(go, exit_code=1, command="go test -v ./...") == (
        "exit 1, test", ("--- FAIL: TestRebase (0.03s)", "Output: fatal: invalid upstream 'main'"))
    # what a Go test logged: before its FAIL line with -v, after it without
    logged = "    load_test.go:20: open testdata/x.json: no such file or directory\n"
    for out in ("=== RUN   TestA\n    a_test.go:9: setup ok\n--- PASS: TestA (0.00s)\n"
                f"=== RUN   TestLoad\n{logged}--- FAIL: TestLoad (0.00s)\nFAIL\n",
                f"--- FAIL: TestLoad (0.00s)\n{logged}FAIL\nFAIL\tex/x\t0.01s\n"):
        assert failure(out, exit_code=1, command="go test ./...") == ("exit 1, test", (
            "--- FAIL: TestLoad (0.00s)",
            "load_test.go:20: open testdata/x.json: no such file or directory"))
    # pytest's E line, unless the FAILED line says it already
    cut = PYTEST.replace("test_add - assert -1 == 5", "test_add - assert -1...")
    found = failure(cut, command="pytest -q")
    assert found == ("test", ("FAILED test_calc.py::test_add - assert -1...", "E assert -1 == 5"))
    found = failure(PYTEST, command="pytest -q")
    assert found == ("test", ("FAILED test_calc.py::test_add - assert -1 == 5", "1 failed in 0.02s"))
    cargo = ("error: failed to load manifest for workspace member `/w/core`\n\nCaused by:\n"
             "  failed to read `/w/core/Cargo.toml`\n\nCaused by:\n"
             "  No such file or directory (os error 2)\n")
    assert failure(cargo, exit_code=101, command="cargo check") == (
        "exit 101, compiler", ("error: failed to load manifest for workspace member `/w/core`",
                               "Caused by: No such file or directory (os error 2)"))

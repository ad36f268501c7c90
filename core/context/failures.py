"""Did a command fail, and what did it say? Read from the output itself, not only an exit code.

An imported session (Claude Code, SWE-agent) carries no exit codes, and a real failure prints
its error in the middle or at the end of the output, often behind a pipe whose own exit code is
0 (`pytest | tail -30`). `SIGNATURES` is a small table of how the tools people run say that
something failed: shells, test runners, compilers, linters, git, package managers, tracebacks.
No model is asked: a line matches a signature or it does not.

Only the head and the tail of a long output are read (where runners print what failed and how
many); the output of a command that prints data (grep, cat, git diff ...) is not read for
signatures at all (source code says "error:" too): only its exit code and the shell's own
complaints count.
"""

from __future__ import annotations

import re
from typing import NamedTuple

HEAD_CHARS = 3000
TAIL_CHARS = 5000
LINE_CHARS = 200  # an error line in the digest is cut to this

# (kind, pattern) over one line. A kind in NOT_NAMING says *that* something failed but not
# what: its line is shown only when no other line names the failure.
SIGNATURES: tuple[tuple[str, str], ...] = (
    ("exit", r"(?:Exit code|exit code:?|Exit status:?|Process exited with code) [1-9]\d*"),
    ("traceback", r"Traceback \(most recent call last\):"),
    ("exception", r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Failure)(?:: .*)?"),
    ("test", r"(?:FAILED|ERROR) \S.*|E {2,}\S.*|=+ .*\b[1-9]\d* (?:failed|errors?)\b.*"),
    ("test", r"--- FAIL: .*|FAIL\b.*|panic: .*|not ok \d+.*|\s*\d+ failing\b.*"),
    ("compiler", r"\S+?:\d+(?::\d+)?:? (?:fatal )?error\b.*|\S+\.go:\d+:\d+: .*"),
    ("compiler", r"error(?:\[E\d+\])?: .*|\S+\(\d+,\d+\): error .*|.*\berror TS\d+: .*"),
    ("linter", r"\S+?:\d+:\d+: [A-Z]{1,3}\d{3,4}\b.*|Found [1-9]\d* errors?\b.*"),
    ("linter", r"[1-9]\d* issues?:.*|✖ [1-9]\d* problems?.*|\s*\d+:\d+\s+error\s.*"),
    ("git", r"fatal: .*|CONFLICT \(.*|Automatic merge failed.*| ! \[rejected\].*"),
    ("package", r"npm ERR! .*|npm error .*|ERROR: (?:Could not|No matching) .*"),
    ("build", r"make(?:\[\d+\])?: \*\*\* .*|\[[\w:.-]+\] ERROR .*|(?:Error|ERROR|FATAL)\b[: ].*"),
    ("tool", r"<tool_use_error>.*"),
    ("shell", r".*: command not found|.*: No such file or directory|.*: Permission denied"),
    ("http", r".*\(HTTP [45]\d\d\)"),
)
NOT_NAMING = frozenset({"exit", "traceback"})
_QUIET = frozenset({"exit", "shell", "tool", "git"})  # what counts in a data command's output
_LINE = re.compile("|".join(f"(?P<{kind}{n}>{pattern})"
                            for n, (kind, pattern) in enumerate(SIGNATURES)), re.MULTILINE)
_WHOLE = re.compile(r"(?:" + _LINE.pattern + r")\s*$")
# Every signature's line holds one of these: only lines they are found in are matched against
# the table (a scan for a few literals is far quicker than trying the table at every line).
_HINT = re.compile(r"rror|RROR|FAIL|fatal|xception|Traceback|panic|xit |exited|not found|denied|"
                   r"No such|CONFLICT|failed|issue|problem|npm |make|HTTP [45]|not ok|failing|"
                   r"\.go:\d|E {2}|Exit|Failure")
# Commands whose output is data (a file, a search, a diff): its words are not the command's own.
DATA_COMMAND = re.compile(
    r"\s*(?:sudo\s+)?(?:grep|egrep|rg|ag|ack|cat|bat|head|tail|less|more|sed|awk|find|fd|ls|"
    r"tree|wc|jq|yq|diff|git\s+(?:diff|show|log|blame|grep|status)|gh\s+(?:pr|issue)\s+"
    r"(?:diff|view)|gh\s+api|echo|printf|nl)\b")


class Failure(NamedTuple):
    """A failed command: how it said so (`exit 2`, or the first signature's kind) and its
    error lines (the first and the last that name the failure, each cut to LINE_CHARS)."""

    kind: str
    lines: tuple[str, ...]


def _region(text: str) -> str:
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    head = text[:HEAD_CHARS]
    tail = text[-TAIL_CHARS:]
    return head[: head.rfind("\n") + 1] + tail[tail.find("\n") + 1:]


def _cut(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def failure(text: str, exit_code: int | None = None, status: str | None = None,
            command: str = "") -> Failure | None:
    """The failure a command's result shows, or None when it went well as far as its output
    and exit code tell. An exit code of 0 is believed unless the command is a pipeline (the
    exit code is then its last part's: `pytest | tail`)."""
    failed = exit_code not in (None, 0) or status in ("error", "denied")
    if exit_code == 0 and "|" not in command and not failed:
        return None
    quiet = bool(command) and DATA_COMMAND.match(command) is not None
    kind, naming, other = _signature_lines(_region(text), quiet)
    if not naming and not other and not failed:
        return None
    if exit_code not in (None, 0):
        kind = f"exit {exit_code}"
    elif status == "denied":
        kind = "denied"
    # a bare "FAIL" names nothing: a line that says what failed is preferred
    lines = [line for line in naming if len(line) >= 12] or naming or other
    if not lines:
        last = [line for line in text[-2000:].splitlines() if line.strip()]
        lines = last[-1:]
    chosen = (lines[0],) if len(lines) == 1 or lines[0] == lines[-1] else (lines[0], lines[-1])
    return Failure(kind or "failed", tuple(_cut(line) for line in chosen))


def _signature_lines(region: str, quiet: bool) -> tuple[str, list[str], list[str]]:
    """The first signature's kind, the lines that name the failure and those that only say
    there was one. `quiet`: a data command's output, where only QUIET kinds count."""
    naming: list[str] = []
    other: list[str] = []
    kind = ""
    end = -1
    for hint in _HINT.finditer(region):
        if hint.start() < end:
            continue  # a line already read
        start = region.rfind("\n", 0, hint.start()) + 1
        end = region.find("\n", hint.start())
        end = len(region) if end < 0 else end
        match = _WHOLE.match(region, start, end)
        if match is None:
            continue
        found = (match.lastgroup or "").rstrip("0123456789")
        line = match.group(0).strip()
        if (quiet and found not in _QUIET) or not line:
            continue
        kind = kind or (" ".join(["exit", line.split()[-1]]) if found == "exit" else found)
        (other if found in NOT_NAMING else naming).append(line)
    return kind, naming, other


def core_command(command: str) -> str:
    """A command without what only shapes its output (`2>&1`, `| tail -30`, `| grep FAIL`):
    two runs with the same core are the same command run again."""
    first = command.split("|", 1)[0] if "|" in command else command
    return " ".join(first.replace("2>&1", " ").split())

"""Did a command fail, and what did it say? Read from the output itself, not only an exit code.

An imported session (Claude Code, SWE-agent) carries no exit codes, and a real failure prints
its error in the middle or at the end of the output, often behind a pipe whose own exit code is
0 (`pytest | tail -30`). `SIGNATURES` is a small table of how the tools people run say that
something failed: shells, test runners, compilers, linters, git, package managers, tracebacks.
No model is asked: a line matches a signature or it does not.

Output is read the way a terminal shows it (`screen`): colour codes stripped, and a line that
carriage returns rewrote (a progress bar, git's "Rebasing (2/4)") as its last segment. Runners
print the cause of a failure inside their own report (Go's `Output: fatal: ...` under a failing
test, pytest's `E   ` lines, cargo's `Caused by:`): those lines are causes (tier 0), kept beside
the line that names what failed.

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

# (kind, tier, pattern) over one line. Tier 0 is a cause printed inside a runner's report (what
# the code under test ran into); 1 names what failed (a test, a file and line, an exception); 2
# adds detail; 3 counts or sums up ("1 failed in 0.2s", "Found 3 errors", git's hints); 4 only
# says *that* something failed (an exit code, a traceback's head).
SIGNATURES: tuple[tuple[str, int, str], ...] = (
    ("exit", 4, r"(?:Exit code|exit code:?|Exit status:?|Process exited with code) [1-9]\d*"),
    ("traceback", 4, r"Traceback \(most recent call last\):"),
    ("test", 0, r"E {2,}\S.*|\s*Output: \S.*"),  # pytest's cause lines; Go's t.Fatalf(... Output:)
    ("test", 0, r"\s+(?:fatal|error): .*"),  # git's complaint, indented in a test's log
    ("build", 0, r"\s*[Cc]aused by:(?: .*)?"),  # cargo, anyhow, Java (alone: the next line says)
    ("exception", 1, r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Failure)(?:: .*)?"),
    ("test", 1, r"(?:FAILED|ERROR) \S.*|--- FAIL: .*|panic: .*|not ok \d+.*|"
                r"thread '.*' panicked at .*"),
    ("test", 3, r"=+ .*\b[1-9]\d* (?:failed|errors?)\b.*|FAIL\b.*|\s*\d+ failing\b.*"),
    ("test", 3, r"[1-9]\d* (?:failed|errors?)\b.* in [\d.]+m?s\b.*"),  # pytest -q's summary
    ("compiler", 1, r"\S+?:\d+(?::\d+)?:? (?:fatal )?error\b.*|\S+\.go:\d+:\d+: .*"),
    ("compiler", 1, r"error(?:\[E\d+\])?: .*|\S+\(\d+,\d+\): error .*|.*\berror TS\d+: .*"),
    ("linter", 1, r"\S+?:\d+:\d+: [A-Z]{1,3}\d{3,4}\b.*|\s*\d+:\d+\s+error\s.*"),
    ("linter", 3, r"Found [1-9]\d* errors?\b.*|[1-9]\d* issues?:.*|✖ [1-9]\d* problems?.*"),
    ("git", 1, r"fatal: .*|CONFLICT \(.*| ! \[rejected\].*"),
    ("git", 3, r"Automatic merge failed.*|hint: [A-Z].*"),  # a hint's first sentence
    ("package", 1, r"npm ERR! .*|npm error .*|ERROR: (?:Could not|No matching) .*"),
    ("build", 3, r"make(?:\[\d+\])?: \*\*\* .*|\[[\w:.-]+\] ERROR .*"),
    ("build", 1, r"(?:Error|ERROR|FATAL)\b[: ].*"),
    ("tool", 1, r"<tool_use_error>.*"),
    # bash `X: command not found`, zsh `zsh:1: command not found: X` and `(eval):1: ...`, dash
    # `sh: 1: X: not found`, fish, PowerShell's and cmd's "is not recognized"
    ("shell", 1, r".*: command not found(?:: .*)?|.*: No such file or directory|"
                 r".*: Permission denied|\S+: \d+: .*: not found"),
    ("shell", 1, r"\S+: (?:no such file or directory|permission denied|no matches found): .*|"
                 r"fish: Unknown command\b.*|.*\bis not recognized as (?:the|a) name of a cmdlet.*|"
                 r"'.+' is not recognized as an internal or external command.*|"
                 r"The system cannot find the (?:path|file) specified.*"),
    ("http", 1, r".*\(HTTP [45]\d\d\)"),
)
_TIER = {f"{kind}{n}": tier for n, (kind, tier, _) in enumerate(SIGNATURES)}
_QUIET = frozenset({"exit", "shell", "tool", "git"})  # what counts in a data command's output
_LINE = re.compile("|".join(f"(?P<{kind}{n}>{pattern})"
                            for n, (kind, _, pattern) in enumerate(SIGNATURES)), re.MULTILINE)
_WHOLE = re.compile(r"(?:" + _LINE.pattern + r")\s*$")
# Every signature's line holds one of these: only lines they are found in are matched against
# the table (a scan for a few literals is far quicker than trying the table at every line).
_HINT = re.compile(r"rror|RROR|FAIL|fatal|xception|Traceback|panic|xit |exited|not found|denied|"
                   r"No such|no such|CONFLICT|failed|issue|problem|npm |make|HTTP [45]|not ok|"
                   r"failing|\.go:\d|E {2}|Exit|Failure|:\d+:\d+: [A-Z]|Output: |d by:|int: |"
                   r"nknown command|not recognized|find the |\[rejected|matches found")
# (Each literal starts with a letter the others start with, or a rare one: a new first letter
# as common as "a" or "o" makes the scan try far more positions.)
_GO_LOG = re.compile(r"\s+\S+_test\.go:\d+: \S")  # a Go test's t.Log / t.Fatal line, indented
_CAUSE_PREFIX = re.compile(r"(?:E|Output:|[Cc]aused by:)\s+")  # what only frames a cause
# Colour, cursor and title codes a terminal acts on and does not show.
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()][\w]|[@-Z\\-_])")
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


def screen(text: str) -> str:
    """`text` as a terminal shows it: colour and cursor codes stripped, and a line that carriage
    returns rewrote (a progress bar) as its last segment that holds anything."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = "\n".join(_shown(line) if "\r" in line else line
                             for line in text.split("\n"))
    return text


def _shown(line: str) -> str:
    return next((part for part in reversed(line.split("\r")) if part.strip()), "")


def _region(text: str) -> str:
    if len(text) > HEAD_CHARS + TAIL_CHARS:
        head = text[:HEAD_CHARS]
        tail = text[-TAIL_CHARS:]
        text = head[: head.rfind("\n") + 1] + tail[tail.find("\n") + 1:]
    return screen(text)


def _cut(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def failure(text: str, exit_code: int | None = None, status: str | None = None,
            command: str = "") -> Failure | None:
    """The failure a command's result shows, or None when it went well as far as its output
    and exit code tell. An exit code of 0 is believed unless the command is a pipeline (the
    exit code is then its last part's: `pytest | tail`). Its kind names the exit code (or a
    denial) and what said it failed: `exit 127, shell`, `test`, `git`."""
    failed = exit_code not in (None, 0) or status in ("error", "denied")
    if exit_code == 0 and "|" not in command and not failed:
        return None
    quiet = bool(command) and DATA_COMMAND.match(command) is not None
    region = _region(text)
    exited, kind, lines = _signature_lines(region, quiet)
    if not lines and not failed:
        return None
    if exit_code not in (None, 0):
        exited = f"exit {exit_code}"
    elif status == "denied":
        exited = "denied"
    if kind in ("compiler", "build") and core_command(command).startswith("git "):
        kind = "git"  # git's `error: ...`
    chosen = _chosen(lines)
    if not chosen:
        last = [line for line in region[-2000:].splitlines() if line.strip()]
        chosen = tuple(last[-1:])
    kind = ", ".join(k for k in (exited, kind) if k)
    return Failure(kind or "failed", tuple(_cut(line) for line in chosen))


def _chosen(lines: list[tuple[int, str]]) -> tuple[str, ...]:
    """The first and the last line of the best tier (a bare "FAIL" names nothing: shorter
    lines count one tier lower); with one such line, the last of the tiers below beside it
    (a count, the summary). A cause (tier 0) takes the second place: the first one, or the
    deepest of a `Caused by:` chain."""
    causes = [line for tier, line in lines if tier == 0]
    ranked = [(tier + (len(line) < 12), line) for tier, line in lines if tier]
    chosen: tuple[str, ...] = ()
    if ranked:
        best = min(tier for tier, _ in ranked)
        top = [line for tier, line in ranked if tier == best]
        below = [line for tier, line in ranked if best < tier < 4 and line != top[0]]
        chosen = ((top[0], top[-1]) if len(top) > 1 and top[0] != top[-1] else
                  (top[0], below[-1]) if below else (top[0],))
    if not causes:
        return chosen
    chain = [line for line in causes if line[:9].lower() == "caused by"]
    cause = chain[-1] if chain else causes[0]
    if chosen and _CAUSE_PREFIX.sub("", cause, 1) in chosen[0]:
        return chosen  # the runner's line says it already (pytest's `FAILED x - assert ...`)
    return (chosen[0], cause) if chosen and chosen[0] != cause else (cause,)


def _signature_lines(region: str, quiet: bool) -> tuple[str, str, list[tuple[int, str]]]:
    """How the output says it exited (`exit 1` from a header, or ""), the first other
    signature's kind, and every line a signature matched with its tier. `quiet`: a data
    command's output, where only QUIET kinds count."""
    lines: list[tuple[int, str]] = []
    exited = kind = ""
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
        group = match.lastgroup or ""
        found = group.rstrip("0123456789")
        line = match.group(0).strip()
        if (quiet and found not in _QUIET) or not line:
            continue
        if found == "exit":
            exited = exited or f"exit {line.split()[-1]}"
        else:
            kind = kind or found
        if line[-1] == ":" and line[:9].lower() == "caused by":  # the cause is the next line
            line = f"{line} {_next_line(region, end)}".rstrip()
        elif line[:8] == "--- FAIL":
            logged = _go_log(region, start, end)
            if logged:
                lines.append((0, logged))
        lines.append((_TIER.get(group, 1), line))
    return exited, kind, lines


def _go_log(region: str, start: int, end: int) -> str:
    """What a Go test logged (t.Fatal, t.Errorf) beside its `--- FAIL:` line: on the line before
    it with -v, on the line after it without."""
    before = region[region.rfind("\n", 0, start - 1) + 1: start - 1] if start else ""
    after = region[end + 1: end + 1 + LINE_CHARS * 2].split("\n", 1)[0]
    return next((line.strip() for line in (before, after) if _GO_LOG.match(line)), "")


def _next_line(region: str, end: int) -> str:
    """The first line after `end` that holds anything."""
    for line in region[end + 1: end + 1000].split("\n"):
        if line.strip():
            return line.strip()
    return ""


def core_command(command: str) -> str:
    """A command without what only shapes its output (`2>&1`, `| tail -30`, `| grep FAIL`):
    two runs with the same core are the same command run again."""
    first = command.split("|", 1)[0] if "|" in command else command
    return " ".join(first.replace("2>&1", " ").split())

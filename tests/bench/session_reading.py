"""The compaction benchmark's own reading of a session: its commands, which of them failed and
what names the cause, and the user's constraint sentences; and what of them a request keeps.

It is judged here, not by the product (a benchmark that asked the digest what it found would
measure nothing):
- a command (a call's `command`/`cmd` argument, not an editor's `view`/`create`) is kept when
  its text (the first 100 characters, whitespace folded) is in the request;
- output is read as a terminal shows it: ANSI codes stripped, a line rewritten by carriage
  returns (a progress bar) read as its last segment;
- a command failed when its result says so in a way a person would read it: a non-zero exit
  code, an `Exit code N` header, a traceback, a test runner's FAIL lines, a compiler's
  `file:line: error`, git's `fatal:`, any shell's "command not found" or "not recognized" ...
  (FAILURE below; the outputs of commands that print files or searches, grep, cat, git diff,
  are not read for it). When the output nests a cause in a runner's report (Go's `Output:`
  and a test's own log line, pytest's `E   `, `Caused by:`), its error text is kept when the
  request holds the command and one of those causes (their first 80 characters); otherwise
  one of its error lines;
- a constraint sentence is a sentence of a user message (prose, not a fenced block; 8 to 300
  characters) with a word of obligation or prohibition (CONSTRAINT_WORDS); kept when it is in
  the request verbatim (whitespace folded, case ignored).
"""

from __future__ import annotations

import json
import re

from core.context.builder import BuiltRequest
from core.model import ConversationMessage

EDITOR_VERBS = {"view", "create", "str_replace", "insert", "undo_edit", "delete"}
VIEWERS = re.compile(r"(?:sudo\s+)?(?:grep|rg|ag|cat|head|tail|less|sed|awk|find|ls|tree|wc|jq|"
                     r"git\s+(?:diff|show|log|blame|grep)|gh\s+pr\s+(?:diff|view)|gh\s+api)\b")
SHELL = (r"|.*command not found.*|.*No such file or directory|.*Permission denied"
         r"|\S+: (?:no such file or directory|permission denied|no matches found): .*"
         r"|fish: Unknown command.*|.*is not recognized as (?:the|a) name of a cmdlet.*"
         r"|'.+' is not recognized as an internal or external command.*|sh: \d+: .*: not found"
         r"|The system cannot find the path specified.*")
# what the shell says of a command that prints data (its output's own words are data)
SHELL_FAILURE = re.compile(r"^(?:Exit code [1-9]\d*" + SHELL + ")$", re.MULTILINE)
FAILURE = re.compile(
    r"^(?:Exit code [1-9]\d*|Traceback \(most recent call last\)|(?:FAILED|FAIL|ERROR)\b.*"
    r"|--- FAIL: .*|fatal: .*|error(?:\[\w+\])?: .*|panic: .*|npm ERR!.*|E {3}.*"
    r"|\w+(?:\.\w+)*(?:Error|Exception): .*|\S+?:\d+(?::\d+)?:? (?:fatal )?error\b.*"
    r"|\S+\.go:\d+:\d+: .*|CONFLICT \(.*|Automatic merge failed.*|make: \*\*\*.*|Error: .*"
    r"|=+ .*\d+ (?:failed|errors?)\b.*|.*\bERROR task failed.*" + SHELL + ")$", re.MULTILINE)
CAUSE = re.compile(r"^(?:E {3}\s*(\S.*)|\s+Output: (\S.*)|\s+\S+_test\.go:\d+: (\S.*)"
                   r"|\s*Caused by:[ \t]*(\S.*)?(?:\n\s*\n?[ \t]*(\S.*))?)$", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
CONSTRAINT_WORDS = re.compile(
    r"\b(?:must|mustn't|should|shouldn't|never|always|don't|do not|required|make sure|ensure|"
    r"avoid|only|need to|needs to|have to|not allowed|keep)\b|必须|不要|务必|禁止|不能|一定",
    re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)


def folded(text: str) -> str:
    return " ".join(text.split())


def terminal(text: str) -> str:
    """What a terminal shows of an output."""
    text = ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(next((s for s in reversed(line.split("\r")) if s.strip()), "")
                     for line in text.split("\n"))


def request_text(built: BuiltRequest) -> str:
    parts = []
    for m in built.messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
        for call in m.get("tool_calls") or ():
            arguments = call["function"]["arguments"]
            try:  # a command's text as written, not JSON-escaped
                args = json.loads(arguments)
                parts += [str(v) for v in args.values()] if isinstance(args, dict) else []
            except ValueError:
                parts.append(arguments)
    return terminal("\n".join(parts))


def _command(arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return ""
    raw = args.get("command", args.get("cmd")) if isinstance(args, dict) else None
    if isinstance(raw, list):
        raw = " ".join(str(x) for x in raw)
    if not isinstance(raw, str) or not raw.strip() or raw.strip() in EDITOR_VERBS:
        return ""
    return folded(raw)


def _errors(command: str, result: ConversationMessage) -> list[str]:
    """The lines that say a command failed: its nested causes when it has some, else the lines
    that name an error besides an `Exit code N` header."""
    output = terminal(result.text())
    errors = [folded(line) for line in
              (SHELL_FAILURE if VIEWERS.match(command) else FAILURE).findall(output)
              if len(folded(line)) >= 12]
    causes = [] if VIEWERS.match(command) or not (errors or result.exit_code) else [
        folded(next(g for g in reversed(found) if g)) for found in CAUSE.findall(output)
        if any(found)]  # (a passing test's log is not a cause)
    named = [e for e in errors if not e.startswith("Exit code ")]
    errors = causes or named or errors
    if result.exit_code not in (None, 0) and not errors:
        lines = [folded(x) for x in output.splitlines() if x.strip()]
        errors = lines[-1:]
    return errors


def commands(history: list[ConversationMessage]) -> dict[str, tuple[str, list[str]]]:
    """Distinct commands (folded text -> (that text, the error lines of its failed runs))."""
    results = {m.tool_call_id: m for m in history if m.role == "tool"}
    out: dict[str, tuple[str, list[str]]] = {}
    for m in history:
        for call in m.tool_calls or ():
            text = _command(call.function.arguments)
            if not text:
                continue
            entry = out.setdefault(text, (text, []))
            result = results.get(call.id)
            if result is not None:
                entry[1].extend(_errors(text, result))
    return out


def constraint_sentences(history: list[ConversationMessage]) -> set[str]:
    out = set()
    for m in history:
        if m.role != "user" or m.kind != "message":
            continue
        for sentence in SENTENCE_END.split(FENCE.sub("\n", m.text())):
            text = folded(sentence)
            if 8 <= len(text) <= 300 and CONSTRAINT_WORDS.search(text):
                out.add(text.lower())
    return out


def kept_facts(history: list[ConversationMessage], text: str) -> dict[str, int]:
    """What of the session's commands, failures and rules the request's `text` holds."""
    text = folded(text)
    lower = text.lower()
    cmds = commands(history)
    failing = {k: v for k, v in cmds.items() if v[1]}
    rules = constraint_sentences(history)
    return {
        "commands": len(cmds),
        "commands_kept": sum(c[:100] in text for c in cmds),
        "failures": len(failing),
        "failures_kept": sum(c[:100] in text and any(e[:80] in text for e in errors)
                             for c, (_, errors) in failing.items()),
        "rules": len(rules),
        "rules_kept": sum(r in lower for r in rules),
    }


def user_intent(history: list[ConversationMessage], built: BuiltRequest) -> tuple[int, int]:
    """User messages sent verbatim, or whose opening (32 characters) the digest carries."""
    verbatim = {folded(c) for m in built.messages if m["role"] == "user"
                and isinstance(c := m.get("content"), str)}
    text = folded(request_text(built))
    users = [m for m in history if m.role == "user" and m.kind == "message" and m.text().strip()]
    kept = sum(1 for u in users if folded(u.text()) in verbatim or folded(u.text())[:32] in text)
    return kept, len(users)

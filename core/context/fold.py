"""The digest's facts: what each log entry contributes (`entry_facts`, memoized by entry id in
the `CompactionMemo`), and their fold over the entries a build leaves out (`fold_units`, in log
order, its checkpoints kept for the next build). core/context/digest.py writes a fold as the
digest's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from core.context.failures import Failure, failure, screen
from core.context.rules import rule_key, rules_in
from core.context.units import Unit
from core.json_text import loads
from core.model import ConversationMessage
from core.todo import TODO_TOOLS, render, todo_state

ERROR_TERMS = (r"(?:error|failed|failure|exception|traceback|panic|denied|not found|fatal|"
               r"not recognized|unknown command)\b")
ERROR = re.compile(r"\b" + ERROR_TERMS, re.IGNORECASE)  # a line that names an error
FILE_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,8}\b")
PATH_KEYS = frozenset({"path", "file_path", "filePath", "notebook_path", "file", "filename",
                       "target"})
COMMAND_KEYS = frozenset({"command", "cmd"})
WRITE_TOOLS = {"write_file": "written", "Write": "written", "edit_file": "edited",
               "Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited"}

EDITOR_VERBS = {"view": "read", "create": "written", "str_replace": "edited",
                "insert": "edited", "undo_edit": "edited"}  # an editor tool's `command`


class Facts(NamedTuple):
    """What one entry contributes to a digest (memoized by entry id; a tuple: ten thousand
    of them are made on a long log's first build)."""

    user: str | None = None  # a user request, whitespace folded
    calls: tuple[tuple[str, str, str, str], ...] = ()  # (call id, tool, verb, path) per path
    commands: tuple[tuple[str, str], ...] = ()  # (call id, command, whitespace folded)
    names: str = ""  # the tools an assistant message called
    plan: bool = False  # the message changes the todo list
    result: tuple[str, str, bool, str] | None = None  # (call id, outcome, failed, error line)
    error: str | None = None  # a failed request
    rules: tuple[str, ...] = ()  # the constraint sentences of a user message


NO_FACTS = Facts()  # an answer in plain text: nothing for the digest (but its line, on demand)
OK_RESULT = Facts(result=("", "ok", False, ""))  # a tool result that went well (its call id
#                                                   is the entry's own: see Fold.add)
ERROR_OPENINGS = ("Error", "<tool_use_error>", "error:")  # a result that says it failed


class FoldMemo(Protocol):
    """What the fold keeps between builds (the `CompactionMemo` of core.context.memo, which
    names the types below): by entry id, its facts and a command result's failure; folds of
    the left-out prefix; the todo list up to a message."""

    facts: dict[str, Facts]
    failures: dict[str, Failure | None]
    checkpoints: dict[int, Checkpoint]
    plans: dict[str, str]


class Compacted(Protocol):
    """What the fold reads of a compaction's decisions (core.context.memo.Compaction): the
    candidates as the view has them, and the shortened ones as they are logged."""

    cands: list[tuple[ConversationMessage, int]]
    logged: dict[int, ConversationMessage]


def entry_line(m: ConversationMessage) -> str:
    """The entry in one line (what followed an error, in the digest): the tools it called
    with their key argument, or the opening of its text."""
    if m.tool_calls:
        return ", ".join(_call_line(c.function.name, c.function.arguments)
                         for c in m.tool_calls[:3])
    return one_line(m.text()[:400], 100)


def _call_line(name: str, arguments: str) -> str:
    try:
        args = loads(arguments or "{}")
    except ValueError:
        return name
    if isinstance(args, dict):
        for key in (*PATH_KEYS, *COMMAND_KEYS):
            value = args.get(key)
            if isinstance(value, str) and value:
                return f"{name} {one_line(value, 60)}"
    return name


def entry_facts(m: ConversationMessage, memo: FoldMemo) -> Facts:
    role = m.role
    if role == "assistant" and not m.tool_calls and m.kind != "error":
        return NO_FACTS  # the common case, without a memo entry
    if role == "tool" and m.exit_code is None and m.status in (None, "ok") and \
            not m.text()[:400].lstrip().startswith(ERROR_OPENINGS):
        return OK_RESULT  # the common case again: a result that went well, no memo entry
    cached = memo.facts.get(m.id)
    if cached is not None:
        return cached
    if role == "tool":
        facts = Facts(None, (), (), "", False, _outcome(m))
    elif m.tool_calls:
        facts = _call_facts(m)
    else:
        text = m.text()
        user = None
        named: tuple[tuple[str, str, str, str], ...] = ()
        rules: tuple[str, ...] = ()
        if role == "user" and m.kind == "message":
            words = text[:50_000].split()
            # its opening (OPENING_CHARS at most), whitespace folded
            user = " ".join(words if len(text) <= 1200 else text[:1200].split())
            rules = rules_in(text)
            if "/" in text:  # paths the user named (a long request, a pasted summary) ...
                # ... outlive its opening. A path has no spaces: only the words with a slash
                # are searched (the same matches, far fewer positions tried).
                found = [p for w in words if "/" in w for p in FILE_PATH.findall(w)]
                named = tuple(("", "", "named", p) for p in dict.fromkeys(found))
        facts = Facts(user, named, (), "", False, None, _failure(m), rules)  # (positional:
        #                                                   a third of the time of keywords)
    memo.facts[m.id] = facts
    return facts


def _outcome(m: ConversationMessage) -> tuple[str, str, bool, str]:
    """(call id, outcome, failed, error line) of a tool result."""
    text = m.text()
    failed = m.status in ("error", "denied") or (m.exit_code not in (None, 0)) or \
        text[:400].lstrip().startswith(ERROR_OPENINGS)
    outcome = (f"exit {m.exit_code}" if m.exit_code is not None
               else ("failed" if failed else "ok"))
    return (m.tool_call_id or "", outcome, failed,
            f"{m.tool_name or 'tool'}: {one_line(_error_lines(text), 200)}" if failed else "")


def _call_facts(m: ConversationMessage) -> Facts:
    """The files and commands of an assistant message's tool calls, and whether it changes
    the todo list."""
    plan = False
    calls: list[tuple[str, str, str, str]] = []
    commands: list[tuple[str, str]] = []
    for c in m.tool_calls or ():
        try:
            args = loads(c.function.arguments or "{}")
        except ValueError:
            args = {}
        args = args if isinstance(args, dict) else {}
        name = c.function.name
        plan = plan or name in TODO_TOOLS
        editor = args.get("command")
        verb = (EDITOR_VERBS[editor] if editor.__class__ is str and editor in EDITOR_VERBS
                and not PATH_KEYS.isdisjoint(args) else None)
        for key, value in args.items():  # a call has a few arguments: fewer lookups
            if key in COMMAND_KEYS and isinstance(value, list):  # ["bash", "-lc", "..."]
                value = " ".join(str(v) for v in value)
            if not isinstance(value, str) or not value:
                continue
            if key in PATH_KEYS:
                calls.append((c.id, name, verb or WRITE_TOOLS.get(name, "read"), value))
            elif key in COMMAND_KEYS and verb is None:
                commands.append((c.id, " ".join(value[:2000].split())))
    names = ", ".join(c.function.name for c in m.tool_calls or ())
    return Facts(None, tuple(calls), tuple(commands), names, plan, None, _failure(m))


def _failure(m: ConversationMessage) -> str | None:
    """A failed request in the digest: its kind only (the message beside it was written for the
    user: "Continue resumes it", "check your key")."""
    if m.kind != "error" or m.error is None:
        return None
    return f"request failed ({m.error.type.replace('_', ' ')})"


def result_failure(m: ConversationMessage, call: ConversationMessage | None,
                    memo: FoldMemo) -> Failure | None:
    """The failure a tool result shows: read with its command line when it is a command's
    result; another tool's only when its status or exit code says it failed (a file's text
    is not read for error lines)."""
    command = ""
    if call is not None and call.tool_calls and any(
            '"cmd"' in c.function.arguments or '"command"' in c.function.arguments
            for c in call.tool_calls):  # a quick no before the arguments are parsed
        command = next((c for cid, c in entry_facts(call, memo).commands
                        if cid == m.tool_call_id), "")
    if not command and m.status not in ("error", "denied") and m.exit_code in (None, 0):
        return None
    if m.id not in memo.failures:
        memo.failures[m.id] = failure(m.text(), m.exit_code, m.status, command)
    return memo.failures[m.id]


class Run(NamedTuple):
    """One run of a command in the left-out part."""

    call_id: str
    command: str  # whitespace folded
    result: ConversationMessage | None = None  # as logged (not a preview of it)
    followed: ConversationMessage | None = None  # the next message of the model or the user


@dataclass
class Fold:
    """The digest's facts gathered so far, in log order (copyable: a checkpoint)."""

    users: list[str] = field(default_factory=list)
    files: dict[str, dict[str, None]] = field(
        default_factory=lambda: {"read": {}, "written": {}, "edited": {}, "named": {}})
    runs: list[Run] = field(default_factory=list)
    by_command: dict[str, tuple[int, ...]] = field(default_factory=dict)  # latest run last
    open_calls: dict[str, int] = field(default_factory=dict)  # call id -> run, no result yet
    awaiting: list[int] = field(default_factory=list)  # runs whose next action is not seen
    errors: list[str] = field(default_factory=list)  # of tools other than commands, requests
    rules: dict[str, str] = field(default_factory=dict)  # rule_key -> newest wording
    plan_until: str = ""  # the last left-out message that changed the todo list
    count: int = 0
    after_error: bool = False  # the next action after an error says how it was handled
    plan: str = ""  # set by fold_units: the todo list, when its latest change is left out

    def copy(self) -> Fold:
        return Fold(self.users[:], {k: dict(v) for k, v in self.files.items()},
                     self.runs[:], dict(self.by_command), dict(self.open_calls),
                     self.awaiting[:], self.errors[:], dict(self.rules), self.plan_until,
                     self.count, self.after_error)

    def add(self, m: ConversationMessage, memo: FoldMemo,
            logged: ConversationMessage | None = None) -> None:
        self.count += 1
        role = m.role
        if role == "tool":
            if self.open_calls and self._command_result(m, logged):
                return
            f = entry_facts(m, memo)
            if f is OK_RESULT:
                return
        elif role == "assistant" and not m.tool_calls and m.kind != "error" and \
                not self.after_error and not self.awaiting:
            return  # an answer in plain text, the common case: nothing for the digest
        else:
            f = entry_facts(m, memo)
        if (self.after_error or self.awaiting) and role in ("assistant", "user"):
            self._followed_by(m)
        if f is NO_FACTS:
            return
        if f.user is not None:
            self.users.append(f.user)
        for rule in f.rules:
            key = rule_key(rule)
            self.rules.pop(key, None)  # the newest wording, in the newest place
            self.rules[key] = rule
        for _cid, _name, verb, path in f.calls:
            self.files[verb][path] = None
        for cid, command in f.commands:
            n = len(self.runs)
            self.runs.append(Run(cid, command))
            self.open_calls[cid] = n
            self.by_command[command] = self.by_command.pop(command, ()) + (n,)
        if f.plan:
            self.plan_until = m.id
        if f.result is not None and f.result[2]:
            self.errors.append(f.result[3])
            self.after_error = True
        if f.error is not None:
            self.errors.append(f.error)
            self.after_error = True


    def _command_result(self, m: ConversationMessage,
                        logged: ConversationMessage | None) -> bool:
        """Whether `m` answers a command (its digest line then says how it went)."""
        run = self.open_calls.pop(m.tool_call_id or "", None)
        if run is None:
            return False
        self.runs[run] = self.runs[run]._replace(result=logged or m)
        self.awaiting.append(run)
        return True

    def _followed_by(self, m: ConversationMessage) -> None:
        """`m` is what the model or the user did after the last error and commands."""
        if self.after_error:
            who = "the user" if m.role == "user" else "the model"
            self.errors[-1] += f" → then {who}: {entry_line(m)}"
            self.after_error = False
        for n in self.awaiting:
            self.runs[n] = self.runs[n]._replace(followed=m)
        self.awaiting.clear()


@dataclass
class Checkpoint:
    units: int  # the fold of units [0, units), all of them left out
    first_id: str
    last_id: str
    fold: Fold


CHECK_EVERY = 256  # units between two saved folds of the left-out prefix


def fold_units(plan: Compacted, units: list[Unit], left_out: Iterable[int],
               memo: FoldMemo) -> Fold:
    """The digest's facts of the left-out units, in log order. On a long log nearly every old
    unit is left out: folds of that all-left-out prefix are saved every CHECK_EVERY units, and
    the next build (after an append) resumes from the latest one that still holds instead of
    folding thousands of entries again."""
    cands, logged = plan.cands, plan.logged
    order = sorted(left_out)
    prefix = 0
    while prefix < len(order) and order[prefix] == prefix:
        prefix += 1
    first_id = cands[0][0].id if cands else ""
    saved = memo.checkpoints
    start, fold = 0, Fold()
    for k in sorted(saved, reverse=True):
        cp = saved[k]
        if k > prefix:
            continue
        if cp.first_id == first_id and cands[units[k - 1].items[-1]][0].id == cp.last_id:
            start, fold = k, cp.fold.copy()
            break
        saved.clear()  # a different log: start over
        break
    add, shortened = fold.add, logged or {}
    for n in order[start:prefix]:
        for i in units[n].items:
            add(cands[i][0], memo, shortened.get(i))
        if (n + 1) % CHECK_EVERY == 0 and n + 1 not in saved:
            saved[n + 1] = Checkpoint(n + 1, first_id, cands[units[n].items[-1]][0].id,
                                      fold.copy())
    for n in order[prefix:]:
        for i in units[n].items:
            add(cands[i][0], memo, shortened.get(i))
    fold.plan = _plan(fold.plan_until, cands, memo)
    return fold


def _plan(until: str, cands: list[tuple[ConversationMessage, int]],
          memo: FoldMemo) -> str:
    """The todo list as the log leaves it, when the latest change to it is left out (`until`);
    "" when a later change is sent (its call and result show the list) or there is none."""
    if not until:
        return ""
    for m, _ in reversed(cands):
        if m.tool_calls and any(c.function.name in TODO_TOOLS for c in m.tool_calls):
            if m.id != until:
                return ""
            break
    cached = memo.plans.get(until)
    if cached is None:
        cached = memo.plans[until] = render(todo_state((m for m, _ in cands), until=until))
    return cached


def _error_lines(text: str) -> str:
    """What a failed output says about the failure: its last lines that name an error, or
    its last line (where commands and tracebacks put it)."""
    lines = [line for line in screen(text[-4000:]).splitlines() if line.strip()]
    named = [line for line in lines if ERROR.search(line)]
    return " / ".join((named or lines)[-2:])


def one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

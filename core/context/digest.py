"""The digest: one message standing for every entry a build leaves out, made without any LLM.

What it holds, in the order it is cut last to first: the user's rules word for word (every
constraint sentence of the left-out requests, core/context/rules.py), the opening of every
request, the files read / written / edited / named, every distinct command with how it went (a
failure read from its output, core/context/failures.py, with its error lines, what followed and
a later run that resolved it), other errors, and the todo list when its latest change is left
out (core/todo.py). Per-entry facts are memoized in the `CompactionMemo`; folds of a long
all-left-out prefix are kept as checkpoints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from core.context.failures import Failure, core_command, failure, screen
from core.context.memo import Compaction, CompactionMemo
from core.context.rules import rule_key, rules_in
from core.context.units import Unit
from core.json_text import loads
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from core.todo import TODO_TOOLS, render, todo_state

DIGEST_SHARE = 0.25  # of the usable budget: the most a digest may take ...
DIGEST_MAX_TOKENS = 6000  # ... and never more than this (twice, when requests need the room)


def digest_caps(usable: int, room: int) -> tuple[int, int]:
    """(soft, hard) limits of a digest: what it normally may take, and what it may grow to
    when even short openings of the left-out requests do not fit (`room`: what the request
    has left)."""
    soft = max(200, min(int(DIGEST_SHARE * usable), DIGEST_MAX_TOKENS))
    return min(soft, max(room, 0)) if room < soft else soft, min(room, 2 * DIGEST_MAX_TOKENS)
OPENING_CHARS = 280  # of a dropped user message, in the digest
SHORT_OPENING = 70  # ... when they are many
MIN_OPENING = 40  # ... the least that still says what was asked
SAMPLE_CHARS = 4000  # of a first digest, counted to estimate the whole one's tokens
DIGEST_MARK = "[Context digest"  # how a digest starts (the builder recognizes it)

ERROR_TERMS = (r"(?:error|failed|failure|exception|traceback|panic|denied|not found|fatal|"
               r"not recognized|unknown command)\b")
ERROR = re.compile(r"\b" + ERROR_TERMS, re.IGNORECASE)  # a line that names an error
FILE_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,8}\b")
PATH_KEYS = frozenset({"path", "file_path", "filePath", "notebook_path", "file", "filename",
                       "target"})
COMMAND_KEYS = frozenset({"command", "cmd"})
WRITE_TOOLS = {"write_file": "written", "Write": "written", "edit_file": "edited",
               "Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited"}

MAX_COMMANDS = 100  # the newest distinct commands of the left-out part; older ones are counted
MAX_ERRORS = 30
MAX_FILES = 150  # per verb
COMMAND_CHARS = 160  # of a command's text, in the digest
EARLIER_RUNS = 4  # of a command that went well at last: its runs looked at for a failure
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
#                                                   is the entry's own: see _Fold.add)
ERROR_OPENINGS = ("Error", "<tool_use_error>", "error:")  # a result that says it failed


def _line(m: ConversationMessage) -> str:
    """The entry in one line (what followed an error, in the digest): the tools it called
    with their key argument, or the opening of its text."""
    if m.tool_calls:
        return ", ".join(_call_line(c.function.name, c.function.arguments)
                         for c in m.tool_calls[:3])
    return _one_line(m.text()[:400], 100)


def _call_line(name: str, arguments: str) -> str:
    try:
        args = loads(arguments or "{}")
    except ValueError:
        return name
    if isinstance(args, dict):
        for key in (*PATH_KEYS, *COMMAND_KEYS):
            value = args.get(key)
            if isinstance(value, str) and value:
                return f"{name} {_one_line(value, 60)}"
    return name


def entry_facts(m: ConversationMessage, memo: CompactionMemo) -> Facts:
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
            f"{m.tool_name or 'tool'}: {_one_line(_error_lines(text), 200)}" if failed else "")


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
                    memo: CompactionMemo) -> Failure | None:
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


class _Run(NamedTuple):
    """One run of a command in the left-out part."""

    call_id: str
    command: str  # whitespace folded
    result: ConversationMessage | None = None  # as logged (not a preview of it)
    followed: ConversationMessage | None = None  # the next message of the model or the user


@dataclass
class _Fold:
    """The digest's facts gathered so far, in log order (copyable: a checkpoint)."""

    users: list[str] = field(default_factory=list)
    files: dict[str, dict[str, None]] = field(
        default_factory=lambda: {"read": {}, "written": {}, "edited": {}, "named": {}})
    runs: list[_Run] = field(default_factory=list)
    by_command: dict[str, tuple[int, ...]] = field(default_factory=dict)  # latest run last
    open_calls: dict[str, int] = field(default_factory=dict)  # call id -> run, no result yet
    awaiting: list[int] = field(default_factory=list)  # runs whose next action is not seen
    errors: list[str] = field(default_factory=list)  # of tools other than commands, requests
    rules: dict[str, str] = field(default_factory=dict)  # rule_key -> newest wording
    plan_until: str = ""  # the last left-out message that changed the todo list
    count: int = 0
    after_error: bool = False  # the next action after an error says how it was handled
    plan: str = ""  # set by fold_units: the todo list, when its latest change is left out

    def copy(self) -> _Fold:
        return _Fold(self.users[:], {k: dict(v) for k, v in self.files.items()},
                     self.runs[:], dict(self.by_command), dict(self.open_calls),
                     self.awaiting[:], self.errors[:], dict(self.rules), self.plan_until,
                     self.count, self.after_error)

    def add(self, m: ConversationMessage, memo: CompactionMemo,
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
            self.runs.append(_Run(cid, command))
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
            self.errors[-1] += f" → then {who}: {_line(m)}"
            self.after_error = False
        for n in self.awaiting:
            self.runs[n] = self.runs[n]._replace(followed=m)
        self.awaiting.clear()


@dataclass
class Checkpoint:
    units: int  # the fold of units [0, units), all of them left out
    first_id: str
    last_id: str
    fold: _Fold


CHECK_EVERY = 256  # units between two kept folds of the left-out prefix


def fold_units(plan: Compaction, units: list[Unit], left_out: Iterable[int],
               memo: CompactionMemo) -> _Fold:
    """The digest's facts of the left-out units, in log order. On a long log nearly every old
    unit is left out: folds of that all-left-out prefix are kept every CHECK_EVERY units, and
    the next build (after an append) resumes from the latest one that still holds instead of
    folding thousands of entries again."""
    cands, logged = plan.cands, plan.logged
    order = sorted(left_out)
    prefix = 0
    while prefix < len(order) and order[prefix] == prefix:
        prefix += 1
    first_id = cands[0][0].id if cands else ""
    kept = memo.checkpoints
    start, fold = 0, _Fold()
    for k in sorted(kept, reverse=True):
        cp = kept[k]
        if k > prefix:
            continue
        if cp.first_id == first_id and cands[units[k - 1].items[-1]][0].id == cp.last_id:
            start, fold = k, cp.fold.copy()
            break
        kept.clear()  # a different log: start over
        break
    add, shortened = fold.add, logged or {}
    for n in order[start:prefix]:
        for i in units[n].items:
            add(cands[i][0], memo, shortened.get(i))
        if (n + 1) % CHECK_EVERY == 0 and n + 1 not in kept:
            kept[n + 1] = Checkpoint(n + 1, first_id, cands[units[n].items[-1]][0].id,
                                      fold.copy())
    for n in order[prefix:]:
        for i in units[n].items:
            add(cands[i][0], memo, shortened.get(i))
    fold.plan = _plan(fold.plan_until, cands, memo)
    return fold


def _plan(until: str, cands: list[tuple[ConversationMessage, int]],
          memo: CompactionMemo) -> str:
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


def _command_lines(fold: _Fold, memo: CompactionMemo) -> list[tuple[str, bool]]:
    """The newest MAX_COMMANDS distinct commands, oldest first, each with how it went: a
    failure with its error lines and what followed, a failure that a later run of the same
    command resolved; and whether the line tells of a failure."""
    out: list[tuple[str, bool]] = []
    shown = list(fold.by_command.items())[-MAX_COMMANDS:]
    for command, numbers in shown:
        last = fold.runs[numbers[-1]]
        text = command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 1] + "…"
        if len(numbers) > 1:
            text += f" (run {len(numbers)} times)"
        if last.result is None:
            out.append((f"{text} → no result", False))
            continue
        failed = _failed(last, memo)
        if failed is None:
            earlier = next((fold.runs[n] for n in reversed(numbers[-EARLIER_RUNS:-1])
                            if _failed(fold.runs[n], memo) is not None), None)
            if earlier is None:
                out.append((f"{text} → ok", False))
            else:
                said = _failed(earlier, memo)
                assert said is not None
                out.append((f"{text} → ok (it had failed: {' … '.join(said.lines)}"
                            f"{_followed(earlier, '; ')}; resolved)", True))
            continue
        line = f"{text} → failed ({failed.kind}): {' … '.join(failed.lines)}"
        line += _followed(last, " → ")
        later = _resolved_by(fold, numbers[-1], memo)
        if later:
            line += f" → resolved: a later `{later}` went well"
        out.append((line, True))
    return out


def _followed(run: _Run, joint: str) -> str:
    """What the model or the user did after the run, as a digest line says it."""
    if run.followed is None:
        return ""
    who = "the user" if run.followed.role == "user" else "the model"
    return f"{joint}then {who}: {_line(run.followed)}"


def _failed(run: _Run, memo: CompactionMemo) -> Failure | None:
    m = run.result
    if m is None:
        return None
    if m.id not in memo.failures:
        memo.failures[m.id] = failure(m.text(), m.exit_code, m.status, run.command)
    return memo.failures[m.id]


def _resolved_by(fold: _Fold, number: int, memo: CompactionMemo) -> str:
    """The command of a later run with the same core (`go build ./...` for `go build ./...
    2>&1 | head`) that went well, if any."""
    core = core_command(fold.runs[number].command)
    for run in fold.runs[number + 1:]:
        if run.result is not None and core_command(run.command) == core:
            return "" if _failed(run, memo) else _one_line(run.command, 80)
    return ""


def digest(fold: _Fold, cap_tokens: int, counter: TokenCounter, memo: CompactionMemo,
           hard_cap: int | None = None) -> tuple[str, int]:
    """One message standing for the left-out entries (their `fold_units`), within
    `cap_tokens`: the user messages' openings are shortened first (to no less than
    SHORT_OPENING); when even those do not fit, the digest may grow to `hard_cap` (the room
    the request has left) with openings down to MIN_OPENING; then the lists keep their newest
    items, and the oldest requests go. The user's rules go last of all."""
    count = fold.count
    if not count:
        return "", 0
    lists = _Lists(fold.users, fold.files, _command_lines(fold, memo), fold.errors, fold.plan,
                   list(fold.rules.values()))
    # Estimate first (4 characters a token), count once: a digest is rebuilt on every build.
    opening = OPENING_CHARS
    while opening > SHORT_OPENING and lists.chars(opening) // 4 > cap_tokens:
        opening = max(SHORT_OPENING, opening // 2)
    if hard_cap is not None and hard_cap > cap_tokens and lists.chars(opening) // 4 > cap_tokens:
        cap_tokens = hard_cap
    while opening > MIN_OPENING and lists.chars(opening) // 4 > cap_tokens:
        opening = max(MIN_OPENING, opening * 2 // 3)
    cut = _Cut()
    text = lists.text(count, opening, cut)
    tokens = 0
    last, last_tokens = memo.counted
    if not (last and last_tokens) and len(text) > 2 * SAMPLE_CHARS:
        # No digest counted yet: tokens per character of a sample of this one.
        last = text[:SAMPLE_CHARS]
        last_tokens = counter.openai_message({"role": "user", "content": last})
    for attempt in range(8):
        if attempt == 0 and last and text != last and last_tokens:
            # Tokens per character of the previous digest: cut to size before counting once.
            tokens = int(len(text) * last_tokens / len(last)) + 1
            if tokens > cap_tokens:
                text = _cut(lists, text, tokens, cap_tokens, count, opening, cut)
        if memo.counted[0] == text:  # the digest of the previous build, often
            tokens = memo.counted[1]
        else:
            tokens = counter.openai_message({"role": "user", "content": text})
            memo.counted = (text, tokens)
        exhausted = cut.users >= len(lists.users) and cut.rules >= len(lists.rules)
        if tokens <= cap_tokens or exhausted or attempt == 7:
            break
        text = _cut(lists, text, tokens, cap_tokens, count, opening, cut)
    return text, tokens


@dataclass
class _Cut:
    """How much of the digest's lists is left out to fit: the newest `share` of each list
    stays (failures before other commands), then the oldest requests go, then the oldest
    rules."""

    share: float = 1.0
    read: float = 1.0  # of the files read and named: the first to go
    users: int = 0
    rules: int = 0


def _cut(lists: _Lists, text: str, tokens: int, cap_tokens: int, count: int, opening: int,
         cut: _Cut) -> str:
    """Cut in characters (cheap) to what `tokens` for `text` says fits: the lists keep their
    newest items first, then the oldest requests go, then the oldest rules."""
    chars = int(len(text) * cap_tokens / tokens * 0.97)
    while len(text) > chars and cut.read > 0:
        cut.read = cut.read / 2 if cut.read > 0.02 else 0.0
        text = lists.text(count, opening, cut)
    while len(text) > chars and cut.share > 0.02:
        cut.share /= 2
        text = lists.text(count, opening, cut)
    if len(text) > chars and cut.share > 0:
        cut.share = 0.0  # the user's requests outrank the lists
        text = lists.text(count, opening, cut)
    if len(text) > chars:
        excess = len(text) - chars
        while excess > 0 and cut.users < len(lists.users):
            excess -= min(len(lists.users[cut.users]), opening) + 4
            cut.users += 1
        while excess > 0 and cut.users >= len(lists.users) and cut.rules < len(lists.rules):
            excess -= len(lists.rules[cut.rules]) + 3
            cut.rules += 1
        text = lists.text(count, opening, cut)
    return text


@dataclass
class _Lists:
    users: list[str]
    files: dict[str, dict[str, None]]
    commands: list[tuple[str, bool]]  # (line, tells of a failure)
    errors: list[str]
    plan: str
    rules: list[str]

    def __post_init__(self) -> None:
        # A request sent again (a skill's text, the same question) is listed once.
        self.repeats: dict[str, int] = {}
        for u in self.users:
            self.repeats[u] = self.repeats.get(u, 0) + 1
        if len(self.repeats) < len(self.users):
            self.users = list(self.repeats)
        # The newest paths of each kind, and the folder most of them share written once
        # (an agent names every file by its absolute path: the same prefix, hundreds of times).
        self.paths = {verb: list(v)[-MAX_FILES:] for verb, v in self.files.items()}
        self.root = _common_folder([p for v in self.paths.values() for p in v])
        if self.root:
            cut = len(self.root) + 1
            self.paths = {verb: [p[cut:] if p.startswith(self.root + "/") else p for p in v]
                          for verb, v in self.paths.items()}
        self._sizes = [len(u) for u in self.users]
        self._rest = -1
        self._lines: dict[tuple[int, bool], list[str]] = {}

    def _times(self, user: str) -> str:
        n = self.repeats.get(user, 1)
        return f" (sent {n} times)" if n > 1 else ""

    def chars(self, opening: int) -> int:
        if self._rest < 0:  # all but the requests' openings: the same at every opening
            self._rest = (sum(len(r) + 3 for r in self.rules)
                          + sum(len(p) + 2 for v in self.paths.values() for p in v)
                          + sum(len(c) + 3 for c, _ in self.commands)
                          + sum(len(e) + 3 for e in self.errors[-MAX_ERRORS:])
                          + len(self.plan) + 400)
        return sum(min(n, opening) for n in self._sizes) + 4 * len(self._sizes) + self._rest

    def text(self, count: int, opening: int, cut: _Cut) -> str:
        """The digest with the newest `cut.share` of each list, all user requests but the
        `cut.users` oldest and all rules but the `cut.rules` oldest."""
        dense = bool(self.users[cut.users:]) and opening < SHORT_OPENING
        if dense:  # under pressure: one line of openings (a line per request costs tokens)
            out = [f"{DIGEST_MARK}: {count:,} earlier entries; the user's requests, oldest "
                   "first:]"]
        else:
            out = [f"{DIGEST_MARK}: {count:,} earlier entries are left out to fit the context "
                   "window. What they held:]"]
        rules = self.rules[cut.rules:]
        if rules:
            out.append("Rules you stated (the user's own words, newest wording):")
            out += [f"- {r}" for r in rules]
        out += self._requests(opening, cut.users, dense)
        if cut.share > 0:
            out += self._work(cut)
        return "\n".join(out)

    def _requests(self, opening: int, skipped: int, dense: bool) -> list[str]:
        users = self.users[skipped:]
        if not users:
            return []
        lines = self._lines.get((opening, dense))
        if lines is None:  # a digest is cut to size in several tries: each opening made once
            lines = self._lines[opening, dense] = (
                [u[:opening].rstrip() for u in self.users] if dense else
                [f"- {u[:opening]}{'…' if len(u) > opening else ''}{self._times(u)}"
                 for u in self.users])
        if dense:
            unlisted = f"({skipped:,} earlier not listed) | " if skipped else ""
            return [unlisted + " | ".join(lines[skipped:])]
        out = ["The user's earlier messages, oldest first:"]
        if skipped:
            out.append(f"- ({skipped:,} earlier requests not listed)")
        return out + lines[skipped:]

    def _work(self, cut: _Cut) -> list[str]:
        """Files, commands, other errors and the plan, each list its newest share."""
        share = cut.share
        out = [f"Paths below are in {self.root}/ unless they start with /."] if self.root else []
        for verb in ("read", "written", "edited", "named"):
            paths, more = _newest(self.paths[verb], MAX_FILES,
                                  min(share, cut.read) if verb in ("read", "named") else share)
            more += len(self.files[verb]) - len(self.paths[verb])
            if paths:
                extra = f" (and {more:,} more)" if more else ""
                label = "Files the user named" if verb == "named" else f"Files {verb}"
                out.append(f"{label}: " + ", ".join(paths) + extra)
        commands = self._commands(share)
        if commands:
            more = len(self.commands) - len(commands)
            out.append("Commands run, oldest first" + (f" (the last {len(commands):,} of "
                                                      f"{len(self.commands):,})" if more
                                                      else "") + ":")
            out += [f"- {c}" for c in commands]
        errors, more = _newest(self.errors, MAX_ERRORS, share)
        if errors:
            out.append("Other errors on the way" + (f" (the last {len(errors):,} of "
                                                    f"{len(self.errors):,})" if more else "")
                       + ":")
            out += [f"- {e}" for e in errors]
        if self.plan:
            out.append("The todo list (its latest change is left out here):")
            out.append(self.plan)
        if self.commands or any(self.files.values()):
            out.append("Earlier tool outputs can be read again with read_tool_result when that "
                       "tool is offered.")
        return out

    def _commands(self, share: float) -> list[str]:
        """The newest `share` of the command lines, and the failures among the older ones
        while they take no more than the kept lines do."""
        items = self.commands
        if not items or share <= 0:
            return []
        n = min(len(items), max(1, int(len(items) * share)))
        keep = set(range(len(items) - n, len(items)))
        budget = sum(len(items[k][0]) for k in keep)
        for k in range(len(items) - n - 1, -1, -1):
            if items[k][1] and len(items[k][0]) <= budget:
                keep.add(k)
                budget -= len(items[k][0])
        return [items[k][0] for k in sorted(keep)]


def _newest(items: list[str], limit: int, share: float) -> tuple[list[str], int]:
    """The newest `share` of at most `limit` items (one at least, when share > 0), and how
    many are not listed."""
    n = min(len(items), max(1, int(limit * share))) if items and share > 0 else 0
    return items[len(items) - n:], len(items) - n


def _common_folder(paths: list[str]) -> str:
    """The deepest folder (two levels down at least) that most absolute paths are in, or ""."""
    absolute = [p.split("/")[:-1] for p in paths if p.startswith("/")]
    if len(absolute) < 3 or len(absolute) * 2 < len(paths):
        return ""
    common = absolute[0]
    for parts in absolute[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common) if len(common) >= 3 else ""  # ["", "Users", "alex"]


def _error_lines(text: str) -> str:
    """What a failed output says about the failure: its last lines that name an error, or
    its last line (where commands and tracebacks put it)."""
    lines = [line for line in screen(text[-4000:]).splitlines() if line.strip()]
    named = [line for line in lines if ERROR.search(line)]
    return " / ".join((named or lines)[-2:])


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

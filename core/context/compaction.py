"""The no-LLM compaction stages: what a build does when history passes the trigger.

When the candidates of a build use more than the trigger (default 80%) of the usable budget,
three pure planners run in order until the target (default 50%) is reached; the last-resort
trimming of the builder (whole old rounds) runs after them only if they could not get under the
usable budget. None of them reads a file, calls a model or writes anything: the log is never
changed, only the view of it that is sent, and every change is recorded per entry.

1. Tool-output compaction (`tool_outputs`): results of tool calls outside the recent tail
   become head+tail previews, oldest first; if that is not enough, one-line references (tool,
   key argument, status, size) that `read_tool_result` opens by the call's id, whether the full
   output was offloaded to `.workbench/tool-results/` or lives only in the log. Long arguments
   of old calls (a file written whole) are shortened the same way. Results of protected tools
   (the todo list) are never touched.
2. Key-message selection (`select`): a mandatory set (the latest user message, the recent
   rounds, user messages newest first up to a token cap, pinned entries, summaries, protected
   tools) plus the rest scored — constraint words, file paths, code, numbers, errors, recency —
   and chosen greedily by score per token within what is left. Units stay whole (a tool call
   with its results). Each left-out entry's score and its parts are in the report.
3. Deterministic digest (`digest`): one synthetic message standing for everything selection
   left out: the opening of every dropped user message, files read / written / edited, commands
   with their exit codes, errors and what followed, the todo list. A window built without any
   LLM call still knows what happened.

Per-entry work (previews, references, scores, facts) is memoized by entry id in a
`CompactionMemo` kept with the conversation's build cache: log entries never change, so a build
after an append only looks at what is new.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from core.context.units import PROTECTED_TOOLS, Unit
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

PREVIEW_TOKENS = 300  # a result longer than this becomes a preview (stage 1, first pass)
HEAD_CHARS = 700
TAIL_CHARS = 400
ARGUMENT_CHARS = 1500  # a longer string argument of an old call is shortened
REFERENCE_TOKENS = 60  # a preview longer than this can become a one-line reference
RECENT_SHARE = 0.4  # of the target: the most the untouched recent tail may take
MIN_UNIT_TOKENS = 30  # the least a sent entry costs (a one-line reference, its framing)
FAR_BACK = ("left out by key-message selection: older than anything that fits even as "
            "one-line references (not scored)")
USER_TOKEN_SHARE = 0.25  # of the target: user messages kept verbatim, newest first ...
MAX_USER_UNITS = 150  # ... at most this many (the others keep their openings in the digest)
MAX_SELECTED_UNITS = 400  # scored units kept besides: thousands of one-line references are
#                           noise to a model (and slow every SDK on the way)
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
DIGEST_MARK = "[Context digest"  # how a digest starts (the builder recognizes it)

# Scoring patterns run over lower-cased text and count hits; most start with a literal so the
# regex engine can skip ahead (a leading \b or lookbehind makes it try every position: five
# times slower on a tool output). A path counts once from its first slash; a bare file name by
# its extension.
CONSTRAINT = re.compile(
    r"\b(?:must|should|needs?|never|always|don't|do not|required?|important|only|avoid|"
    r"make sure|ensure)\b|必须|需要|不要|务必|一定")
PATH = re.compile(r"/[\w-][\w./-]*|\.(?:py|go|ts|js|rs|java|c|h|cpp|md|json|yaml|yml|toml|txt|"
                  r"sh|sql|html|css)\b")
NUMBER = re.compile(r"\d[\d,.:]*")
_ERROR_TERMS = r"(?:error|failed|failure|exception|traceback|panic|denied|not found)\b"
ERROR_WORDS = re.compile(_ERROR_TERMS)
ERROR = re.compile(r"\b" + _ERROR_TERMS, re.IGNORECASE)  # a line that names an error
SCORED_CHARS = 3000  # of a message's text, scored ...
SCORED_OUTPUT_CHARS = 400  # ... of a tool output's (its head says what it is)
FILE_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,8}\b")
PATH_KEYS = frozenset({"path", "file_path", "filePath", "notebook_path", "file", "filename",
                       "target"})
COMMAND_KEYS = frozenset({"command", "cmd"})
WRITE_TOOLS = {"write_file": "written", "Write": "written", "edit_file": "edited",
               "Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited"}


@dataclass
class CompactionMemo:
    """Per-entry work, by entry id (log entries never change)."""

    encoding: str = ""
    previews: dict[str, tuple[ConversationMessage, int]] = field(default_factory=dict)
    references: dict[str, tuple[ConversationMessage, int]] = field(default_factory=dict)
    scores: dict[str, tuple[float, str]] = field(default_factory=dict)
    facts: dict[str, _Facts] = field(default_factory=dict)
    unchanged: set[str] = field(default_factory=set)  # calls whose arguments are short
    counted: tuple[str, int] = ("", 0)  # the last digest and its tokens
    checkpoints: dict[int, _Checkpoint] = field(default_factory=dict)  # see fold_units

    def for_encoding(self, name: str) -> CompactionMemo:
        if name != self.encoding:
            self.encoding = name
            self.previews.clear()
            self.references.clear()
            self.scores.clear()
            self.counted = ("", 0)
            self.checkpoints.clear()
        return self


@dataclass
class Compaction:
    """What the stages decided (indexes are into the build's candidates and units)."""

    cands: list[tuple[ConversationMessage, int]]  # the view: shortened copies where changed
    unit_tokens: list[int]
    staged: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)
    left_out: dict[int, str] = field(default_factory=dict)  # unit -> reason (digested)
    digest: str = ""
    digest_tokens: int = 0


# --- stage 1: tool outputs -----------------------------------------------------------------------


def horizon(units: list[Unit], unit_tokens: list[int], room: int) -> int:
    """The first unit that could still be sent: going back from the newest, where the cheapest
    form of everything newer (a one-line reference per tool result) alone fills `room`, older
    units can only be left out (mandatory ones aside). Bounds the work on a long log."""
    floor = 0
    for n in range(len(units) - 1, -1, -1):
        items = len(units[n].items)
        floor += min(unit_tokens[n], MIN_UNIT_TOKENS * items)
        if floor > room:
            return n + 1
    return 0


def protected_units(plan: Compaction, units: list[Unit]) -> set[int]:
    """Pinned units and summaries, and the latest call of each protected tool (the todo list
    as it stands; its older states may go)."""
    out: set[int] = set()
    seen: set[str] = set()
    for n in range(len(units) - 1, -1, -1):
        u = units[n]
        if u.protected:
            out.add(n)
        if u.tool and u.tool not in seen:
            seen.add(u.tool)
            out.add(n)
    return out


def tail_start(units: list[Unit], unit_tokens: list[int], recent_rounds: int,
               room: int) -> int:
    """The first unit of the recent tail the stages leave untouched: the last
    `recent_rounds` rounds, but no more of them than RECENT_SHARE of `room` (one round of an
    agent can hold hundreds of tool calls), and always the last unit."""
    if not units:
        return 0
    last_round = units[-1].round_no
    limit = RECENT_SHARE * room
    used = 0
    n = len(units) - 1
    while n > 0:
        u = units[n - 1]
        if u.round_no <= last_round - recent_rounds or used + unit_tokens[n - 1] > limit:
            break
        used += unit_tokens[n - 1]
        n -= 1
    return n


def tool_outputs(plan: Compaction, units: list[Unit], tail: int, over: int,
                 counter: TokenCounter, memo: CompactionMemo, first: int = 0,
                 protected: set[int] | None = None) -> int:
    """Shorten old tool results (and long arguments of old calls) from unit `first` on until
    `over` tokens are saved; returns what is still over (<= 0 when enough)."""
    protected = protected or set()
    eligible = [(n, i) for n in range(first, tail)
                if len(units[n].items) > 1 and n not in protected for i in units[n].items]
    originals = {i: plan.cands[i] for _, i in eligible}
    for kind in ("preview", "reference"):
        for n, i in eligible:
            if over <= 0:
                return over
            m, tokens = plan.cands[i]
            if m.pinned:
                continue
            # a reference describes the logged output, not the preview that stood for it
            made = shorter(originals[i][0], tokens, kind, counter, memo)
            if made is None:
                continue
            copy, new_tokens = made
            saved = tokens - new_tokens
            if saved <= 0:
                continue
            original = originals[i][1]
            plan.cands[i] = (copy, new_tokens)
            plan.unit_tokens[n] -= saved
            over -= saved
            decision = "previewed" if kind == "preview" else "referenced"
            why = ("old tool output shown as its head and tail" if kind == "preview"
                   else "old tool output replaced by a reference read_tool_result can open")
            if m.role == "assistant":
                why = "long arguments of an old tool call shortened"
            plan.staged[m.id] = (decision, why, "tool outputs", original)
    return over


def shorter(m: ConversationMessage, tokens: int, kind: str, counter: TokenCounter,
             memo: CompactionMemo) -> tuple[ConversationMessage, int] | None:
    if m.role == "assistant":
        if kind != "preview" or not m.tool_calls:
            return None
        if m.id in memo.unchanged:
            return None
        cached = memo.previews.get(m.id)
        if cached is None:
            if all(len(c.function.arguments) <= ARGUMENT_CHARS for c in m.tool_calls):
                memo.unchanged.add(m.id)
                return None
            calls = [c.model_copy(update={"function": c.function.model_copy(
                update={"arguments": _short_arguments(c.function.arguments)})})
                for c in m.tool_calls]
            if all(a.function.arguments == b.function.arguments
                   for a, b in zip(calls, m.tool_calls, strict=True)):
                memo.unchanged.add(m.id)
                return None
            copy = m.model_copy(update={"tool_calls": calls, "token_counts": {}})
            cached = memo.previews[m.id] = (copy, counter.message(copy))
        return cached
    if m.role != "tool":
        return None
    preview = kind == "preview"
    if tokens <= (PREVIEW_TOKENS if preview else REFERENCE_TOKENS):
        return None
    made = memo.previews if preview else memo.references
    cached = made.get(m.id)
    if cached is None:
        content = _head_tail(m) if preview else _reference(m)
        copy = m.model_copy(update={"content": content, "token_counts": {}})
        cached = made[m.id] = (copy, counter.message(copy))
    return cached


def _head_tail(m: ConversationMessage) -> str:
    text = m.text()
    ref = m.tool_call_id or m.id
    head = text[:HEAD_CHARS]
    head = head[: head.rfind("\n")] if "\n" in head[HEAD_CHARS // 2:] else head
    tail = text[-TAIL_CHARS:]
    tail = tail[tail.find("\n") + 1:] if "\n" in tail[: TAIL_CHARS // 2] else tail
    omitted = len(text) - len(head) - len(tail)
    lines = text.count("\n", len(head), len(text) - len(tail))
    return (f"{head}\n[… {omitted:,} characters ({lines:,} lines) of this output left out to "
            f"fit the context; read_tool_result(ref=\"{ref}\") shows all of it …]\n{tail}")


def _reference(m: ConversationMessage) -> str:
    ref = m.tool_call_id or m.id
    size = len(m.text())
    status = m.status or "done"
    code = f", exit {m.exit_code}" if m.exit_code is not None else ""
    name = m.tool_name or "tool"
    return (f"[{name} output ({status}{code}, {size:,} characters) left out to fit the "
            f"context; read_tool_result(ref=\"{ref}\") shows it]")


def _short_arguments(arguments: str) -> str:
    if len(arguments) <= ARGUMENT_CHARS:
        return arguments
    try:
        args = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(args, dict):
        return arguments
    out = {k: (v[:300] + f" …[{len(v) - 300:,} characters left out]"
               if isinstance(v, str) and len(v) > ARGUMENT_CHARS // 3 else v)
           for k, v in args.items()}
    return json.dumps(out, ensure_ascii=False)


# --- stage 2: key-message selection ---------------------------------------------------------------


def select(plan: Compaction, units: list[Unit], tail: int, room: int,
           memo: CompactionMemo, first: int = 0, protected: set[int] | None = None,
           logged: list[tuple[ConversationMessage, int]] | None = None) -> int:
    """Keep the mandatory units and the best-scoring others within `room` tokens; the rest
    go to `plan.left_out`. Units before `first` (see `horizon`) are left out unless
    mandatory, without being scored. Scores are of the `logged` entries (the candidates before
    any stage shortened them; `plan.cands` when not given). Returns how many units it chose
    besides the mandatory ones."""
    logged = logged if logged is not None else plan.cands
    protected = protected or set()
    n_units = len(units)
    mandatory = [False] * n_units
    user_room = int(room * USER_TOKEN_SHARE)
    users_left = MAX_USER_UNITS
    for n in range(n_units - 1, -1, -1):
        u = units[n]
        if n >= tail or u.latest_user or n in protected:
            mandatory[n] = True
        elif u.user and users_left and plan.unit_tokens[n] <= user_room:
            mandatory[n] = True
            user_room -= plan.unit_tokens[n]
            users_left -= 1
    room -= sum(t for t, must in zip(plan.unit_tokens, mandatory, strict=True) if must)
    for n in range(first):
        if not mandatory[n]:
            plan.left_out[n] = FAR_BACK
    last_round = units[-1].round_no if units else 0
    scored: list[tuple[float, int, str]] = []
    for n in range(first, n_units):
        if mandatory[n]:
            continue
        u = units[n]
        base, parts = 0.0, []
        for i in u.items:
            s, why = _score(logged[i][0], memo)
            base += s
            if why:
                parts.append(why)
        recency = 2.0 * (u.round_no / last_round if last_round else 1.0)
        score = base + recency
        per_token = score / max(1, plan.unit_tokens[n]) ** 0.5
        scored.append((per_token, n, f"score {score:.1f} ({', '.join(parts + ['recency'])})"))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    chosen = 0
    for _, n, why in scored:
        if plan.unit_tokens[n] <= room and chosen < MAX_SELECTED_UNITS:
            room -= plan.unit_tokens[n]
            chosen += 1
        else:
            plan.left_out[n] = f"left out by key-message selection: {why}"
    return chosen


def _score(m: ConversationMessage, memo: CompactionMemo) -> tuple[float, str]:
    """The score of a log entry as logged (not of a shortened copy: the same entry scores
    the same in every build), and its parts."""
    cached = memo.scores.get(m.id)
    if cached is not None:
        return cached
    text = m.text()[:SCORED_OUTPUT_CHARS if m.role == "tool" else SCORED_CHARS]
    if m.tool_calls:
        text += " " + " ".join(c.function.arguments[:1000] for c in m.tool_calls)
    text = text.lower()
    parts: list[str] = []
    score = 0.0
    for name, pattern, weight in (("constraints", CONSTRAINT, 2.0), ("paths", PATH, 1.0),
                                  ("numbers", NUMBER, 0.3), ("errors", ERROR_WORDS, 1.5)):
        if pattern is CONSTRAINT and m.role == "tool":
            continue  # "must" in a compiler's output is not the user's constraint
        hits = len(pattern.findall(text))
        if hits:
            score += weight * min(hits, 5)
            parts.append(f"{name} {hits}")
    if "```" in text or "\n    " in text:
        score += 1.0
        parts.append("code")
    if m.role == "user":
        score += 3.0
        parts.append("user")
    if m.status in ("error", "denied") or (m.kind == "error"):
        score += 2.0
    cached = memo.scores[m.id] = (score, ", ".join(parts))
    return cached


# --- stage 3: the digest ------------------------------------------------------------------------

MAX_COMMANDS = 60  # the newest commands of the left-out part; older ones are counted
MAX_ERRORS = 30
MAX_FILES = 150  # per verb


class _Facts(NamedTuple):
    """What one entry contributes to a digest (memoized by entry id; a tuple: ten thousand
    of them are made on a long log's first build)."""

    user: str | None = None  # a user request, whitespace folded
    calls: tuple[tuple[str, str, str, str], ...] = ()  # (call id, tool, verb, path) per path
    commands: tuple[tuple[str, str], ...] = ()  # (call id, command line)
    names: str = ""  # the tools an assistant message called
    todo: str | None = None
    result: tuple[str, str, bool, str] | None = None  # (call id, outcome, failed, error line)
    error: str | None = None  # a failed request


NO_FACTS = _Facts()  # an answer in plain text: nothing for the digest (but its line, on demand)
OK_RESULT = _Facts(result=("", "ok", False, ""))  # a tool result that went well (its call id
#                                                   is the entry's own: see _Fold.add)
ERROR_OPENINGS = ("Error", "<tool_use_error>", "error:")  # a result that says it failed


def _line(m: ConversationMessage) -> str:
    """The entry in one line (what followed an error, in the digest)."""
    if m.tool_calls:
        return ", ".join(c.function.name for c in m.tool_calls)
    return _one_line(m.text()[:400], 100)


def _facts(m: ConversationMessage, memo: CompactionMemo) -> _Facts:
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
        facts = _Facts(result=_outcome(m))
    elif m.tool_calls:
        facts = _call_facts(m)
    else:
        text = m.text()
        user = None
        named: tuple[tuple[str, str, str, str], ...] = ()
        if role == "user" and m.kind == "message":
            user = " ".join(text[:2000].split())
            if "/" in text:  # paths the user named (a long request, a pasted summary) ...
                # ... outlive its opening. A path has no spaces: only the words with a slash
                # are searched (the same matches, far fewer positions tried).
                found = [p for word in text[:50_000].split() if "/" in word
                         for p in FILE_PATH.findall(word)]
                named = tuple(("", "", "named", p) for p in dict.fromkeys(found))
        facts = _Facts(user, named, error=_failure(m))
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


def _call_facts(m: ConversationMessage) -> _Facts:
    """The files and commands of an assistant message's tool calls, and the todo list."""
    todo = None
    calls: list[tuple[str, str, str, str]] = []
    commands: list[tuple[str, str]] = []
    for c in m.tool_calls or ():
        try:
            args = json.loads(c.function.arguments or "{}")
        except ValueError:
            args = {}
        args = args if isinstance(args, dict) else {}
        name = c.function.name
        if name in PROTECTED_TOOLS:
            todo = _todo_text(args)
        for key, value in args.items():  # a call has a few arguments: fewer lookups
            if not isinstance(value, str) or not value:
                continue
            if key in PATH_KEYS:
                calls.append((c.id, name, WRITE_TOOLS.get(name, "read"), value))
            elif key in COMMAND_KEYS:
                commands.append((c.id, _one_line(value, 160)))
    names = ", ".join(c.function.name for c in m.tool_calls or ())
    return _Facts(None, tuple(calls), tuple(commands), names, todo, None, _failure(m))


def _failure(m: ConversationMessage) -> str | None:
    """A failed request in the digest: its kind only (the message beside it was written for the
    user: "Continue resumes it", "check your key")."""
    if m.kind != "error" or m.error is None:
        return None
    return f"request failed ({m.error.type.replace('_', ' ')})"


@dataclass
class _Fold:
    """The digest's facts gathered so far, in log order (copyable: a checkpoint)."""

    users: list[str] = field(default_factory=list)
    files: dict[str, dict[str, None]] = field(
        default_factory=lambda: {"read": {}, "written": {}, "edited": {}, "named": {}})
    commands: dict[str, tuple[str, str]] = field(default_factory=dict)  # call id -> (line, outcome)
    errors: list[str] = field(default_factory=list)
    todo: str = ""
    count: int = 0
    after_error: bool = False  # the next action after an error says how it was handled

    def copy(self) -> _Fold:
        return _Fold(self.users[:], {k: dict(v) for k, v in self.files.items()},
                     dict(self.commands), self.errors[:], self.todo, self.count,
                     self.after_error)

    def add(self, m: ConversationMessage, memo: CompactionMemo) -> None:
        self.count += 1
        f = _facts(m, memo)
        if self.after_error and m.role in ("assistant", "user"):
            who = "the user" if m.role == "user" else "the model"
            self.errors[-1] += f" → then {who}: {_line(m)}"
            self.after_error = False
        if f is NO_FACTS:
            return
        if f is OK_RESULT:
            cid = m.tool_call_id or ""
            if cid in self.commands:
                self.commands[cid] = (self.commands[cid][0], "ok")
            return
        if f.user is not None:
            self.users.append(f.user)
        for _cid, _name, verb, path in f.calls:
            self.files[verb][path] = None
        for cid, line in f.commands:
            self.commands[cid] = (line, "")
        if f.todo is not None:
            self.todo = f.todo
        if f.result is not None:
            cid, outcome, failed, line = f.result
            cid = cid or m.tool_call_id or ""
            if cid in self.commands:
                self.commands[cid] = (self.commands[cid][0], outcome)
            if failed:
                self.errors.append(line)
                self.after_error = True
        if f.error is not None:
            self.errors.append(f.error)
            self.after_error = True


@dataclass
class _Checkpoint:
    units: int  # the fold of units [0, units), all of them left out
    first_id: str
    last_id: str
    fold: _Fold


CHECK_EVERY = 256  # units between two kept folds of the left-out prefix


def fold_units(cands: list[tuple[ConversationMessage, int]], units: list[Unit],
               left_out: Iterable[int], memo: CompactionMemo) -> _Fold:
    """The digest's facts of the left-out units, in log order. On a long log nearly every old
    unit is left out: folds of that all-left-out prefix are kept every CHECK_EVERY units, and
    the next build (after an append) resumes from the latest one that still holds instead of
    folding thousands of entries again."""
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
    for n in order[start:prefix]:
        for i in units[n].items:
            fold.add(cands[i][0], memo)
        if (n + 1) % CHECK_EVERY == 0 and n + 1 not in kept:
            kept[n + 1] = _Checkpoint(n + 1, first_id, cands[units[n].items[-1]][0].id,
                                      fold.copy())
    for n in order[prefix:]:
        for i in units[n].items:
            fold.add(cands[i][0], memo)
    return fold


def digest(fold: _Fold, cap_tokens: int, counter: TokenCounter, memo: CompactionMemo,
           hard_cap: int | None = None) -> tuple[str, int]:
    """One message standing for the left-out entries (their `fold_units`), within
    `cap_tokens`: the user messages' openings are shortened first (to no less than
    SHORT_OPENING); when even those do not fit, the digest may grow to `hard_cap` (the room
    the request has left) with openings down to MIN_OPENING; then the lists keep their newest
    items."""
    count, users, files, commands, errors, todo = (fold.count, fold.users, fold.files,
                                                   fold.commands, fold.errors, fold.todo)
    if not count:
        return "", 0
    lists = _Lists(users, files, [f"{c} → {o}" if o else c for c, o in commands.values()],
                   errors, todo)
    # Estimate first (4 characters a token), count once: a digest is rebuilt on every build.
    opening = OPENING_CHARS
    while opening > SHORT_OPENING and lists.chars(opening) // 4 > cap_tokens:
        opening = max(SHORT_OPENING, opening // 2)
    if hard_cap is not None and hard_cap > cap_tokens and lists.chars(opening) // 4 > cap_tokens:
        cap_tokens = hard_cap
    while opening > MIN_OPENING and lists.chars(opening) // 4 > cap_tokens:
        opening = max(MIN_OPENING, opening * 2 // 3)
    keep_lists, skip_users = 1.0, 0
    text = lists.text(count, opening, keep_lists, skip_users)
    tokens = 0
    last, last_tokens = memo.counted
    for attempt in range(7):
        if attempt == 0 and last and text != last and last_tokens:
            # Tokens per character of the previous digest: cut to size before counting once.
            tokens = int(len(text) * last_tokens / len(last)) + 1
            if tokens > cap_tokens:
                text, keep_lists, skip_users = _cut(lists, text, tokens, cap_tokens, count,
                                                    opening, keep_lists, skip_users, users)
        if memo.counted[0] == text:  # the digest of the previous build, often
            tokens = memo.counted[1]
        else:
            tokens = counter.openai_message({"role": "user", "content": text})
            memo.counted = (text, tokens)
        if tokens <= cap_tokens or skip_users >= len(users) or attempt == 6:
            break
        text, keep_lists, skip_users = _cut(lists, text, tokens, cap_tokens, count, opening,
                                            keep_lists, skip_users, users)
    return text, tokens


def _cut(lists: _Lists, text: str, tokens: int, cap_tokens: int, count: int, opening: int,
         keep_lists: float, skip_users: int, users: list[str]) -> tuple[str, float, int]:
    """Cut in characters (cheap) to what `tokens` for `text` says fits: the lists keep their
    newest items first, then the oldest requests go."""
    chars = int(len(text) * cap_tokens / tokens * 0.97)
    while len(text) > chars and keep_lists > 0.02:
        keep_lists /= 2
        text = lists.text(count, opening, keep_lists, skip_users)
    if len(text) > chars and keep_lists > 0:
        keep_lists = 0.0  # the user's requests outrank the lists
        text = lists.text(count, opening, keep_lists, skip_users)
    if len(text) > chars:
        excess = len(text) - chars
        while excess > 0 and skip_users < len(users):
            excess -= min(len(users[skip_users]), opening) + 4
            skip_users += 1
        text = lists.text(count, opening, keep_lists, skip_users)
    return text, keep_lists, skip_users


@dataclass
class _Lists:
    users: list[str]
    files: dict[str, dict[str, None]]
    commands: list[str]
    errors: list[str]
    todo: str

    def chars(self, opening: int) -> int:
        return (sum(min(len(u), opening) + 4 for u in self.users)
                + sum(len(p) + 2 for v in self.files.values() for p in list(v)[-MAX_FILES:])
                + sum(len(c) + 3 for c in self.commands[-MAX_COMMANDS:])
                + sum(len(e) + 3 for e in self.errors[-MAX_ERRORS:]) + len(self.todo) + 400)

    def text(self, count: int, opening: int, share: float, skip_users: int = 0) -> str:
        """The digest with the newest `share` of each list, and all user requests but the
        `skip_users` oldest."""
        def newest(items: list[str], limit: int) -> tuple[list[str], int]:
            n = min(len(items), max(1, int(limit * share))) if items and share > 0 else 0
            return items[len(items) - n:], len(items) - n

        users, skipped = self.users[skip_users:], skip_users
        if users and opening < SHORT_OPENING:
            # Under pressure: one dense line (a line and a marker per request cost tokens).
            out = [f"{DIGEST_MARK}: {count:,} earlier entries; the user's requests, oldest "
                   "first:]"]
            unlisted = f"({skipped:,} earlier not listed) | " if skipped else ""
            out.append(unlisted + " | ".join(u[:opening].rstrip() for u in users))
        else:
            out = [f"{DIGEST_MARK}: {count:,} earlier entries are left out to fit the context "
                   "window. What they held:]"]
        if users and opening >= SHORT_OPENING:
            out.append("The user's earlier messages, oldest first:")
            if skipped:
                out.append(f"- ({skipped:,} earlier requests not listed)")
            out += [f"- {u[:opening]}{'…' if len(u) > opening else ''}" for u in users]
        for verb in ("read", "written", "edited", "named"):
            paths, more = newest(list(self.files[verb]), MAX_FILES)
            if paths:
                extra = f" (and {more:,} more)" if more else ""
                label = "Files the user named" if verb == "named" else f"Files {verb}"
                out.append(f"{label}: " + ", ".join(paths) + extra)
        commands, more = newest(self.commands, MAX_COMMANDS)
        if commands:
            out.append("Commands run" + (f" (the last {len(commands):,} of "
                                         f"{len(self.commands):,})" if more else "") + ":")
            out += [f"- {c}" for c in commands]
        errors, more = newest(self.errors, MAX_ERRORS)
        if errors:
            out.append("Errors on the way" + (f" (the last {len(errors):,} of "
                                              f"{len(self.errors):,})" if more else "") + ":")
            out += [f"- {e}" for e in errors]
        if self.todo:
            out.append(f"The todo list then: {self.todo}")
        if share > 0 and (self.commands or any(self.files.values())):
            out.append("Earlier tool outputs can be read again with read_tool_result when that "
                       "tool is offered.")
        return "\n".join(out)


def _error_lines(text: str) -> str:
    """What a failed output says about the failure: its last lines that name an error, or
    its last line (where commands and tracebacks put it)."""
    lines = [line for line in text[-4000:].splitlines() if line.strip()]
    named = [line for line in lines if ERROR.search(line)]
    return " / ".join((named or lines)[-2:])


def _todo_text(args: dict[str, Any]) -> str:
    items = args.get("todos") or args.get("items") or []
    if not isinstance(items, list):
        return ""
    parts = []
    for item in items[:30]:
        if isinstance(item, dict):
            title = item.get("content") or item.get("title") or item.get("text") or ""
            parts.append(f"{title} ({item.get('status', '?')})")
    return "; ".join(parts)


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

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
3. Deterministic digest (core/context/digest.py, its facts in core/context/fold.py): one
   synthetic message standing for everything selection left out.

Per-entry work (previews, references, scores, facts) is memoized by entry id in a
`CompactionMemo` (core/context/memo.py) held with the conversation's build cache.
"""

from __future__ import annotations

import json
import re

from core.context.failures import Failure, screen
from core.context.fold import ERROR_TERMS, result_failure
from core.context.memo import Compaction, CompactionMemo
from core.context.rules import CONSTRAINT, may_hold_rule
from core.context.units import Unit
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
# Scoring patterns run over lower-cased text and count hits; most start with a literal so the
# regex engine can skip ahead (a leading \b or lookbehind makes it try every position: five
# times slower on a tool output). A path counts once from its first slash; a bare file name by
# its extension.
PATH = re.compile(r"/[\w-][\w./-]*|\.(?:py|go|ts|js|rs|java|c|h|cpp|md|json|yaml|yml|toml|txt|"
                  r"sh|sql|html|css)\b")
NUMBER = re.compile(r"\d[\d,.:]*")
ERROR_WORDS = re.compile(ERROR_TERMS)  # the same words as the digest's error lines
ERROR_HINTS = ("error", "fail", "exception", "traceback", "panic", "denied", "not found")
# ... and in a short tool output, a shell's and git's complaints (`zsh:1: command not found: x`,
# `fatal: ...`, cmd's "is not recognized": the whole output; each word more is a scan of a text)
OUTPUT_HINTS = (*ERROR_HINTS, "fatal", "not recognized", "unknown command")
SCORED_CHARS = 3000  # of a message's text, scored ...
SCORED_OUTPUT_CHARS = 400  # ... of a tool output's (its head says what it is)


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


TAIL_MARGIN = 200  # of the history's room, left beside an oversized tail (for the digest)


def tail_excess(unit_tokens: list[int], tail: int, room: int) -> int:
    """How far the recent tail exceeds `room`, all the history may take: a single round can
    (one file read whole, a command that printed a megabyte). Its tool outputs are then
    shortened too, as old ones are (the full output stays on disk), rather than the round
    dropped whole by the trim."""
    return sum(unit_tokens[tail:]) - (room - TAIL_MARGIN)


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
                 protected: set[int] | None = None, recent: bool = False) -> int:
    """Shorten old tool results (and long arguments of old calls) from unit `first` on until
    `over` tokens are saved; returns what is still over (<= 0 when enough). `recent`: the
    units are the recent tail's (which alone exceeds its room), said so in the reasons."""
    protected = protected or set()
    eligible = [(n, i) for n in range(first, tail)
                if len(units[n].items) > 1 and n not in protected for i in units[n].items]
    originals = {i: plan.cands[i] for _, i in eligible}
    # When even a reference for every old output cannot save enough, each one ends up as its
    # reference: making its preview first (a copy, counted) would be work thrown away. The
    # first pass then only shortens long arguments, which references leave as they are.
    units_in = {n for n, _ in eligible}
    most = sum(max(0, plan.unit_tokens[n] - MIN_UNIT_TOKENS * len(units[n].items))
               for n in units_in)
    hopeless = over > most + 10 * len(eligible)
    for kind in ("preview", "reference"):
        for n, i in eligible:
            if over <= 0:
                return over
            m, tokens = plan.cands[i]
            if m.pinned or (hopeless and kind == "preview" and m.role == "tool"):
                continue
            # a reference describes the logged output, not the preview that stood for it
            made = shorter(originals[i][0], tokens, kind, counter, memo,
                           originals[units[n].items[0]][0])
            if made is None:
                continue
            copy, new_tokens = made
            saved = tokens - new_tokens
            if saved <= 0:
                continue
            original = originals[i][1]
            plan.logged.setdefault(i, originals[i][0])
            plan.cands[i] = (copy, new_tokens)
            plan.unit_tokens[n] -= saved
            over -= saved
            decision = "previewed" if kind == "preview" else "referenced"
            why = ("old tool output shown as its head and tail" if kind == "preview"
                   else "old tool output replaced by a reference read_tool_result can open")
            if m.role == "assistant":
                why = "long arguments of an old tool call shortened"
            if recent:
                why = why.replace("old tool", "recent tool") + \
                    ": the latest rounds alone exceed the budget"
            plan.staged[m.id] = (decision, why, "tool outputs", original)
    return over


def shorter(m: ConversationMessage, tokens: int, kind: str, counter: TokenCounter,
            memo: CompactionMemo, call: ConversationMessage | None = None
            ) -> tuple[ConversationMessage, int] | None:
    """A shorter copy of an old entry (and its tokens), or None when it cannot be shorter: a
    tool result as its head and tail (`preview`) or a one-line reference, long arguments of a
    call cut. `call`: the assistant message that made the call (a command's failure is read
    with its command line)."""
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
        failed = result_failure(m, call, memo)
        content = _head_tail(m, failed) if preview else _reference(m, failed)
        copy = m.model_copy(update={"content": content, "token_counts": {}})
        cached = made[m.id] = (copy, counter.message(copy))
    return cached


def _head_tail(m: ConversationMessage, failed: Failure | None = None) -> str:
    text = m.text()
    ref = m.tool_call_id or m.id
    head = text[:HEAD_CHARS]
    head = head[: head.rfind("\n")] if "\n" in head[HEAD_CHARS // 2:] else head
    tail = text[-TAIL_CHARS:]
    tail = tail[tail.find("\n") + 1:] if "\n" in tail[: TAIL_CHARS // 2] else tail
    omitted = len(text) - len(head) - len(tail)
    lines = text.count("\n", len(head), len(text) - len(tail))
    says = ""
    if failed is not None:  # a failure named only in the part left out: its lines, verbatim
        shown = " ".join(head.split()) + " " + " ".join(tail.split())
        named = [line for line in failed.lines if line not in shown]
        says = ("; it says: " + " … ".join(named)) if named else ""
    return (f"{head}\n[… {omitted:,} characters ({lines:,} lines) of this output left out to "
            f"fit the context{says}; read_tool_result(ref=\"{ref}\") shows all of it …]\n"
            f"{tail}")


def _reference(m: ConversationMessage, failed: Failure | None = None) -> str:
    ref = m.tool_call_id or m.id
    size = len(m.text())
    status: str = m.status or "done"
    if failed is not None and status in ("done", "ok"):
        status = "failed"
    code = f", exit {m.exit_code}" if m.exit_code is not None else ""
    name = m.tool_name or "tool"
    says = f": {' … '.join(failed.lines)}" if failed is not None else ""  # and its cause
    return (f"[{name} output ({status}{code}, {size:,} characters{says}) left out to fit the "
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
    scored: list[tuple[float, int, float]] = []
    for n in range(first, n_units):
        if mandatory[n]:
            continue
        u = units[n]
        score = 2.0 * (u.round_no / last_round if last_round else 1.0)  # recency
        for i in u.items:
            score += _score(logged[i][0], memo)[0]
        scored.append((score / max(1, plan.unit_tokens[n]) ** 0.5, n, score))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    chosen = 0
    for _, n, score in scored:
        if plan.unit_tokens[n] <= room and chosen < MAX_SELECTED_UNITS:
            room -= plan.unit_tokens[n]
            chosen += 1
        else:  # the reason, with the score's parts, only for what is left out
            parts = [why for i in units[n].items if (why := _score(logged[i][0], memo)[1])]
            plan.left_out[n] = (f"left out by key-message selection: score {score:.1f} "
                                f"({', '.join([*parts, 'recency'])})")
    return chosen


def _score(m: ConversationMessage, memo: CompactionMemo) -> tuple[float, str]:
    """The score of a log entry as logged (not of a shortened copy: the same entry scores
    the same in every build), and its parts."""
    cached = memo.scores.get(m.id)
    if cached is not None:
        return cached
    text = m.text()[:SCORED_OUTPUT_CHARS if m.role == "tool" else SCORED_CHARS]
    if m.role == "tool" and ("\r" in text or "\x1b" in text):  # as a terminal shows it: a
        # progress bar's frames and colour codes would fill the head that is scored
        text = screen(m.text()[:8 * SCORED_OUTPUT_CHARS])[:SCORED_OUTPUT_CHARS]
    if m.tool_calls:
        text += " " + " ".join(c.function.arguments[:1000] for c in m.tool_calls)
    text = text.lower()
    parts: list[str] = []
    score = 0.0
    # Each pattern runs only where a quick substring test says it may match (most entries
    # hold no constraint and no error word; the patterns' scans are most of a scoring).
    if m.role != "tool" and may_hold_rule(text):  # a compiler's "must" is not the user's
        score += _hits(CONSTRAINT, text, "constraints", 2.0, parts)
    if "/" in text or "." in text:
        score += _hits(PATH, text, "paths", 1.0, parts)
    score += _hits(NUMBER, text, "numbers", 0.3, parts)
    short = m.role == "tool" and len(text) < SCORED_OUTPUT_CHARS
    for word in OUTPUT_HINTS if short else ERROR_HINTS:
        if word in text:
            score += _hits(ERROR_WORDS, text, "errors", 1.5, parts)
            break
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


def _hits(pattern: re.Pattern[str], text: str, name: str, weight: float,
          parts: list[str]) -> float:
    """A scoring pattern's part of a score (at most five hits count), its count in `parts`."""
    hits = len(pattern.findall(text))
    if not hits:
        return 0.0
    parts.append(f"{name} {hits}")
    return weight * min(hits, 5)

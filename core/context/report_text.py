"""Build reports in words: the one place that formats them, for the meter's tooltip, the CLI's
`workbench context` and (next) the Context Inspector, so they never tell different stories."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from core.context.projection import summary_tokens
from core.context.report import BuildReport, entry_dicts, sent_in
from core.llm.tokens import REPLY_PRIMER, TokenCounter
from core.model import ConversationMessage

WARNING_AT = 0.80  # the compaction trigger: above it the meter turns orange

# Where the window a request is built for came from (Budget.source), in words.
WINDOW_SOURCES = {
    "override": "your setting",
    "budget": "the budget asked for, not a window",
    "server": "what the server says its model takes",
    "provider": "the limit the provider stated",
    "litellm": "litellm's figure for the model",
    "default": "a guess: the model is unknown",
}


def window_source(source: str) -> str:
    return WINDOW_SOURCES.get(source, source)


def window_applied(window: int, source: str, note: str | None) -> str:
    """The sentence beside Settings' context window: which window requests are built for."""
    if source == "default":  # the note would say it at length
        return (f"Requests are built for {window:,} tokens: a guess, as the model is unknown "
                "to litellm and its server has not said. Set the window here if it is "
                "smaller or larger; a server that refuses a longer request teaches it.")
    text = f"Requests are built for {window:,} tokens: {window_source(source)}."
    return f"{text} {note[0].upper()}{note[1:].rstrip('.')}." if note else text


def calibrated(factor: float, before: str = "", after: str = "") -> str:
    """What a figure shown with the calibration `factor` says of it, between `before` and
    `after` ("" for our own count: nothing to say)."""
    if factor == 1.0:
        return ""
    return f"{before}calibrated against the provider's counts: x{factor:.3f}{after}"


def summary_size(m: ConversationMessage, counter: TokenCounter, r: BuildReport
                 ) -> tuple[int, str]:
    """A summary's size for the compaction history, and a sentence on it: as measured when
    it was written (its notice's figure, kept with it), else (a summary written before sizes
    were kept) what it costs in the request `r` now."""
    if m.measured is not None:
        tokens = m.measured.tokens
        return tokens, (f"Its size when it was written: {tokens:,} tokens in a request"
                        f"{calibrated(m.measured.calibration, ' (', ')')}, as its notice "
                        "said.")
    tokens = r.shown(summary_tokens(m, counter))
    return tokens, (f"Its size in the next request: {tokens:,} tokens"
                    f"{calibrated(r.calibration, ' (', ')')}.")


def usage_state(used: int, usable: int) -> str:
    """normal | warning (past the compaction trigger) | over."""
    return "over" if used > usable else "warning" if used > WARNING_AT * usable else "normal"


# Where a context window the user set came from (LLMSettings.sources), named as they would find it.
SET_IN = {"global": "Settings → Context window", "project": "the project's context_window",
          "environment": "WORKBENCH_CONTEXT_WINDOW", "command line": "--context-window"}


def _tooltip_parts(r: BuildReport, draft: int, set_in: str | None
                   ) -> tuple[str, list[tuple[str, int]], list[str]]:
    """The meter's breakdown: a head line, (part, tokens) rows, and notes."""
    used = r.provider_estimate + draft
    head = f"{used:,} of {r.usable:,} usable tokens ({r.model}, {r.mode} mode)"
    rows = [("system prompt", r.shown(r.totals["system"]))]
    if r.instructions_sent:
        rows.append(("project instructions", r.shown(r.totals.get("instructions", 0))))
    rows += [("tools", r.shown(r.totals["tools"])),
             ("summary, digest", r.shown(r.totals.get("summary", 0))),
             ("history", r.shown(r.totals["history"])), ("your draft", draft)]
    source = (f"your setting: {SET_IN.get(set_in, set_in)}"
              if r.budget_source == "override" and set_in else window_source(r.budget_source))
    notes = [f"reserved for the answer {r.reserved_output:,}; window {r.window:,} ({source})"]
    if r.calibration_basis:
        notes.append(f"counts: {r.calibration_basis}")
    elif r.calibration != 1.0:
        notes.append(f"calibrated against the provider: x{r.calibration:.3f}")
    if r.budget_note:
        notes.append(r.budget_note)
    if r.instructions or r.instructions_note:
        notes.append(instructions_line(r))
    if usage_state(used, r.usable) != "normal":
        counts = decision_counts(r)
        left = sum(counts.get(d, 0) for d in LEFT_OUT)
        if left:
            notes.append(f"{left:,} older entries are left out to fit")
        shortened = counts.get("previewed", 0) + counts.get("referenced", 0)
        if shortened:
            notes.append(f"{shortened:,} old tool outputs are shortened")
    return head, rows, notes


def tooltip_lines(r: BuildReport, draft: int, set_in: str | None = None) -> list[str]:
    """The meter's breakdown as plain lines: what the next request would use, the draft
    included (`set_in`: where a window the user set came from, LLMSettings.sources)."""
    head, rows, notes = _tooltip_parts(r, draft, set_in)
    return [head, *(f"  {name:<20} {n:>9,}" for name, n in rows), *(f"  {n}" for n in notes)]


def tooltip_html(r: BuildReport, draft: int, set_in: str | None = None, cost: str = "") -> str:
    """The same as rich text, its figures in a right-aligned column (a tooltip's font is
    proportional: spaces do not line figures up); `cost`: what the next request would cost."""
    head, rows, notes = _tooltip_parts(r, draft, set_in)
    notes = [*notes, cost] if cost else notes
    table = "".join(f"<tr><td>{escape(name)}</td><td align='right'>&nbsp;&nbsp;{n:,}</td></tr>"
                    for name, n in rows)
    return (f"<p style='white-space:pre'><b>{escape(head)}</b></p>"
            f"<table cellspacing='0' cellpadding='1'>{table}</table>"
            + "".join(f"<p>{escape(n)}</p>" for n in notes))


LEFT_OUT = ("dropped", "digested", "summarized")


def instructions_switch(r: BuildReport) -> tuple[str, bool, str]:
    """The Inspector's switch for the project instructions: its text ("" when the project has
    none), whether they are sent, and its tooltip."""
    if not r.instructions:
        return "", False, ""
    if not r.instructions_sent:
        return (f"{r.instructions} · off", False,
                f"Project instructions: {r.instructions} is in the project folder but not sent "
                "in this conversation. Tick to send it.")
    tokens = r.totals.get("instructions", 0)
    tip = (f"Project instructions: {r.instructions} from the project folder is part of every "
           "request's system "
           "prefix, after Context Workbench's rules. Turning it off here changes this "
           f"conversation's requests only.{_file_size(r)}")
    return (f"{r.instructions} · {tokens:,} tokens", True,
            f"{tip} {r.instructions_note}." if r.instructions_note else tip)


def _file_size(r: BuildReport) -> str:
    """The project instructions' size is the file's, by our count: it changes when the file
    does, not when the calibration moves; a request's share of it is calibrated (said)."""
    tokens = r.totals.get("instructions", 0)
    if r.calibration == 1.0:
        return ""
    return (f" {r.instructions} is {tokens:,} tokens by our count (tiktoken); a request counts "
            f"it as {r.shown(tokens):,}{calibrated(r.calibration, ', ')}.")


def instructions_line(r: BuildReport) -> str:
    """The project instructions in a sentence: the file sent and its cost, or why none is."""
    if not r.instructions:
        return ("project instructions: "
                f"{r.instructions_note or 'none (the project has no AGENTS.md or CLAUDE.md)'}")
    if not r.instructions_sent:
        return f"project instructions: {r.instructions} not sent ({r.instructions_note})"
    tokens = r.totals.get("instructions", 0)  # the file's size, by our count (see _file_size)
    line = f"project instructions: {r.instructions}, {tokens:,} tokens"
    if r.calibration != 1.0:
        line += f" ({r.shown(tokens):,} in a request, calibrated)"
    return f"{line} ({r.instructions_note})" if r.instructions_note else line


def decision_counts(r: BuildReport) -> dict[str, int]:
    return r.decision_counts()


def stage_line(r: BuildReport) -> str | None:
    """The compaction stages that ran, with what they did, or None when none ran."""
    parts = []
    for s in r.stages:
        if s["name"] in ("tool outputs", "key messages") and s.get("changed"):
            parts.append(f"{s['name']}: {s['changed']:,} changed")
        elif s["name"] == "digest" and s.get("tokens"):
            parts.append(f"digest: {s['tokens']:,} tokens")
        elif s["name"] == "reused":
            parts.append(f"the compaction of {s['builds']:,} requests ago, reused "
                         f"({s['changed']:,} changed, {s['left out']:,} left out; only what "
                         "is new is appended)")
    return "compaction " + "; ".join(parts) if parts else None


def _reused(r: BuildReport) -> bool:
    return any(s["name"] == "reused" for s in r.stages)


def cli_lines(r: BuildReport, positions: dict[str, int], messages_sent: int) -> list[str]:
    """`workbench context`: the budget, the totals, and every entry that was not kept as is."""
    lines = [
        f"model {r.model} · mode {r.mode} · window {r.window:,} ({r.budget_source}) · "
        f"usable {r.usable:,} · reserved for the answer {r.reserved_output:,}",
    ]
    if r.budget_note:
        lines.append(f"note: {r.budget_note}")
    lines.append(f"used {r.provider_estimate:,} of {r.usable:,} tokens ({r.percent:.1f}%): "
                 f"system {r.shown(r.totals['system']):,}, "
                 f"project instructions {r.shown(r.totals.get('instructions', 0)):,}, "
                 f"tools {r.shown(r.totals['tools']):,}, "
                 f"summary/digest {r.shown(r.totals.get('summary', 0)):,}, "
                 f"history {r.shown(r.totals['history']):,}")
    lines.append(instructions_line(r))
    if r.calibration_basis:
        lines.append(f"counts: {r.calibration_basis}")
    elif r.calibration != 1.0:
        lines.append(f"(figures calibrated against the provider: x{r.calibration:.3f})")
    stages = stage_line(r)
    if stages:
        lines.append(stages)
    if r.compaction and not _reused(r):  # the stage line says a reuse, with its figures
        lines.append(f"compaction: {r.compaction}")
    counts = decision_counts(r)
    lines.append("entries: " + ", ".join(f"{n} {d}" for d, n in sorted(counts.items())))
    for entry in r.entries:
        if entry.decision != "kept":
            where = (f"#{positions[entry.id]}" if entry.id in positions
                     else f"({entry.kind})" if not entry.id else "(new)")
            before = r.shown(entry.tokens_before if entry.tokens_before is not None
                             else entry.tokens)
            tokens = (f"{before:>7,} → {r.shown(entry.tokens):,}"
                      if entry.decision in ("previewed", "referenced") else f"{before:>7,}")
            lines.append(f"  {where:>8} {entry.decision:<10} {entry.role:<9} {tokens} tok  "
                         f"{entry.reason}")
    lines += [f"  normalize: {note}" for note in r.normalize_notes]
    lines.append(f"built in {r.elapsed_ms:.1f} ms; {messages_sent} messages would be sent")
    return lines


def budget_parts(r: BuildReport, draft: int = 0, draft_inside: bool = False
                 ) -> list[tuple[str, int]]:
    """The request against its window, part by part (the Inspector's bar): system prompt,
    project instructions, tools, summary and digest, history, your draft, reserved for the
    answer, free. `draft_inside`: the request was built with the draft as its last message
    (its tokens are shown as the draft's, not again in the history)."""
    shown = r.shown
    history = shown(r.totals.get("history", 0))
    if draft_inside:
        draft = min(draft, history)
        history -= draft
    parts = [("system", shown(r.totals.get("system", 0))),
             ("instructions", shown(r.totals.get("instructions", 0))),
             ("tools", shown(r.totals.get("tools", 0))),
             ("summary", shown(r.totals.get("summary", 0))),
             ("history", history),
             ("draft", draft), ("reserved", r.reserved_output)]
    used = sum(t for _, t in parts)
    parts.append(("free", max(0, r.window - used)))
    return parts


def inspector_rows(r: BuildReport, positions: dict[str, int],
                   pause: Callable[[], None] | None = None
                   ) -> list[tuple[int, str, str, str, int, int, str, str]]:
    """Every entry's decision in log order (synthetic ones first), for the Inspector:
    (position, id, decision, role, tokens before, tokens after, stage, reason), the tokens
    calibrated as every figure shown. `pause`: see BuildReport.rows."""
    at, cal = positions.get, r.calibration
    out = [(at(entry_id, 0), entry_id, decision, role,
            round((before if before is not None else tokens) * cal), round(tokens * cal),
            stage, reason)
           for entry_id, role, _kind, decision, reason, tokens, stage, before
           in r.rows(pause)]
    out.sort(key=lambda row: row[0])
    return out


def inspector_header(r: BuildReport) -> str:
    counts = decision_counts(r)
    stages = stage_line(r)
    lines = [f"{r.provider_estimate:,} of {r.usable:,} usable tokens ({r.percent:.0f}%) · window "
             f"{r.window:,} ({window_source(r.budget_source)}) · {r.model}, {r.mode} mode",
             "entries: " + (", ".join(f"{n:,} {d}" for d, n in sorted(counts.items()))
                            or "none yet (a new conversation)")]
    if r.calibration_basis:
        lines.append(f"counts: {r.calibration_basis}")
    if stages:
        lines.append(stages)
    if r.compaction and not _reused(r):  # the stage line says a reuse, with its figures
        lines.append(f"compaction: {r.compaction}")
    return "\n".join(lines)


SENT = ("kept", "previewed", "referenced")


def identical_lead(before: list[dict[str, Any]] | None, messages: list[dict[str, Any]]) -> int:
    """How many messages at the start of `messages` are exactly those of `before`."""
    same = 0
    for old, new in zip(before or (), messages, strict=False):
        if old != new:
            break
        same += 1
    return same


def stable_prefix(before: list[dict[str, Any]], messages: list[dict[str, Any]],
                  report: BuildReport, counter: TokenCounter) -> dict[str, int]:
    """How much of `messages` repeats `before` exactly from the start (what a provider's
    prompt cache can reuse): {"messages", "tokens", "of_tokens"}."""
    same = identical_lead(before, messages)
    # The request's messages cost what the report says (less the tools and the reply
    # primer); only what follows the stable prefix is counted (usually the last turn's few
    # messages, not the tens of thousands of tokens before them).
    total = max(1, report.used - report.totals.get("tools", 0) - REPLY_PRIMER)
    stable = max(0, total - sum(counter.openai_message(m) for m in messages[same:]))
    return {"messages": same, "tokens": stable, "of_tokens": total}


def cached_tokens(usage: dict[str, Any] | None) -> int | None:
    """The prompt tokens a provider says it read from its cache (OpenAI's
    prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens), if it said."""
    if not usage:
        return None
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    if value is None:
        value = usage.get("cache_read_input_tokens")
    return int(value) if isinstance(value, int | float) else None


def since_last(before: list[Any], sent_before: set[str] | None, messages: list[dict[str, Any]],
               report: BuildReport, counter: TokenCounter, when: str,
               cached: int | None = None, tools_changed: bool = False) -> str:
    """What changed since the last request sent (`before`: its messages; `sent_before`: the
    ids of the entries it carried, None when unknown): the stable prefix, the leading messages
    identical to it (what a provider's prompt cache can reuse), the entries that joined or
    left the request, and (`cached`) what the provider said it read from its cache for the
    last one. `tools_changed`: the tools offered differ, and providers put them before the
    messages: nothing is a stable prefix then."""
    figures = stable_prefix(before, messages, report, counter)
    same, stable, total = figures["messages"], figures["tokens"], figures["of_tokens"]
    if tools_changed:
        line = (f"Since the last request ({when}): the tools offered changed, and they come "
                f"before the messages, so a provider's prompt cache starts over (the first "
                f"{same:,} of {len(messages):,} messages are identical)")
    else:
        line = (f"Since the last request ({when}): the first {same:,} of {len(messages):,} "
                f"messages are identical — a stable prefix of {stable:,} tokens "
                f"({100 * stable / total:.0f}%) a provider's prompt cache can reuse")
    if cached is not None:
        line += f"; the provider read {cached:,} tokens of the last one from its cache"
    if sent_before is not None:
        sent_now = report.sent_ids()
        added, gone = len(sent_now - sent_before), len(sent_before - sent_now)
        line += (f"; {added:,} {'entry' if added == 1 else 'entries'} joined, {gone:,} "
                 f"{'entry' if gone == 1 else 'entries'} left")
    return line + "."


def sent_before(copy: dict[str, Any]) -> tuple[list[Any], set[str] | None]:
    """A saved request's copy (its JSON) as `since_last` takes it: its messages, and the ids
    of the entries it carried (None when its report has no entries)."""
    report = copy.get("report")
    messages = copy.get("messages")
    return (messages if isinstance(messages, list) else [],
            sent_in(report, SENT) if isinstance(report, dict) else None)


def saved_view(report: dict[str, Any], positions: dict[str, int]
               ) -> tuple[str, list[tuple[str, int]],
                          list[tuple[int, str, str, str, int, int, str, str]]]:
    """A saved request's report (its JSON) as the Inspector shows it: header, bar, rows."""
    def num(key: str, where: dict[str, Any] = report) -> int:
        value = where.get(key)
        return int(value) if isinstance(value, int | float) else 0

    totals = report.get("totals") if isinstance(report.get("totals"), dict) else {}
    assert isinstance(totals, dict)
    parts = [(name, num(name, totals))
             for name in ("system", "instructions", "tools", "summary", "history")]
    parts += [("draft", 0), ("reserved", num("reserved_output"))]
    parts.append(("free", max(0, num("window") - sum(t for _, t in parts))))
    rows = []
    counts: dict[str, int] = {}
    for e in entry_dicts(report) or []:
        decision = str(e.get("decision", ""))
        counts[decision] = counts.get(decision, 0) + 1
        tokens = num("tokens", e)
        before = e.get("tokens_before")
        rows.append((positions.get(str(e.get("id", "")), 0), str(e.get("id", "")), decision,
                     str(e.get("role", "")), int(before) if isinstance(before, int) else tokens,
                     tokens, str(e.get("stage", "")), str(e.get("reason", ""))))
    rows.sort(key=lambda row: row[0])
    header = (f"{num('used'):,} of {num('usable'):,} usable tokens · window {num('window'):,} · "
              f"{report.get('model', '?')}, {report.get('mode', '?')} mode\n"
              "entries: " + ", ".join(f"{n:,} {d}" for d, n in sorted(counts.items())))
    prefix = report.get("stable_prefix")
    if isinstance(prefix, dict):
        header += "\n" + prefix_line(num("messages", prefix), num("tokens", prefix),
                                     max(1, num("of_tokens", prefix)))
    if isinstance(report.get("compaction"), str) and report["compaction"]:
        header += f"\ncompaction: {report['compaction']}"
    return header, parts, rows


def prefix_line(same: int, tokens: int, total: int) -> str:
    return (f"against the request before it: the first {same:,} messages identical — a stable "
            f"prefix of {tokens:,} tokens ({100 * tokens / total:.0f}%)")

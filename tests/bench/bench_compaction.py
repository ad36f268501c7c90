"""Context quality without any LLM: the compaction stages against a naive baseline (drop the
oldest rounds until it fits, tool pairs kept whole), on the shared real trajectories at 10%,
25% and 50% of each one's full size; and the stages' speed on a 10,000-message log.

What a request keeps is judged here by this file's own reading of the session, not by the
product's (a benchmark that asked the digest what it found would measure nothing):
- a command (a call's `command`/`cmd` argument, not an editor's `view`/`create`) is kept when
  its text (the first 100 characters, whitespace folded) is in the request;
- a command failed when its result says so in a way a person would read it: a non-zero exit
  code, an `Exit code N` header, a traceback, a test runner's FAIL lines, a compiler's
  `file:line: error`, git's `fatal:` ... (FAILURE below; the outputs of commands that print
  files or searches, grep, cat, git diff, are not read for it). Its error text is kept when
  the request holds the command and one of those lines (its first 80 characters);
- a constraint sentence is a sentence of a user message (prose, not a fenced block; 8 to 300
  characters) with a word of obligation or prohibition (CONSTRAINT_WORDS); kept when it is in
  the request verbatim (whitespace folded, case ignored).
"""

from __future__ import annotations

import gc
import json
import re
import time
from collections import defaultdict

from core.context.budget import Budget
from core.context.builder import BudgetError, BuildCache, BuiltRequest, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from tests.bench.common import SHARED_TRAJECTORIES, big_messages, median, report

COUNTER = TokenCounter("o200k_base")
COMPOSER = PromptComposer()
FRACTIONS = (0.10, 0.25, 0.50)
ROOMY = 200  # below this, a window has no room for history beyond the latest message


def build(history: list[ConversationMessage], usable: int, compact: bool,
          cache: BuildCache | None = None) -> BuiltRequest:
    return build_request(history, "agent", model="gpt-4o", budget=Budget(usable, 0, 0, "bench"),
                         counter=COUNTER, composer=COMPOSER, compact=compact, cache=cache)


def folded(text: str) -> str:
    return " ".join(text.split())


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
    return "\n".join(parts)


EDITOR_VERBS = {"view", "create", "str_replace", "insert", "undo_edit", "delete"}
VIEWERS = re.compile(r"(?:sudo\s+)?(?:grep|rg|ag|cat|head|tail|less|sed|awk|find|ls|tree|wc|jq|"
                     r"git\s+(?:diff|show|log|blame|grep)|gh\s+pr\s+(?:diff|view)|gh\s+api)\b")
FAILURE = re.compile(
    r"^(?:Exit code [1-9]\d*|Traceback \(most recent call last\)|(?:FAILED|FAIL|ERROR)\b.*"
    r"|--- FAIL: .*|fatal: .*|error(?:\[\w+\])?: .*|panic: .*|npm ERR!.*|E {3}.*"
    r"|\w+(?:\.\w+)*(?:Error|Exception): .*|\S+?:\d+(?::\d+)?:? (?:fatal )?error\b.*"
    r"|\S+\.go:\d+:\d+: .*|CONFLICT \(.*|Automatic merge failed.*|make: \*\*\*.*"
    r"|.*command not found|.*No such file or directory|.*Permission denied"
    r"|=+ .*\d+ (?:failed|errors?)\b.*|.*\bERROR task failed.*)$", re.MULTILINE)
CONSTRAINT_WORDS = re.compile(
    r"\b(?:must|mustn't|should|shouldn't|never|always|don't|do not|required|make sure|ensure|"
    r"avoid|only|need to|needs to|have to|not allowed|keep)\b|必须|不要|务必|禁止|不能|一定",
    re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)


def commands(history: list[ConversationMessage]) -> dict[str, tuple[str, list[str]]]:
    """Distinct commands (folded text -> (that text, the error lines of its failed runs))."""
    results = {m.tool_call_id: m for m in history if m.role == "tool"}
    out: dict[str, tuple[str, list[str]]] = {}
    for m in history:
        for call in m.tool_calls or ():
            try:
                args = json.loads(call.function.arguments or "{}")
            except ValueError:
                continue
            if not isinstance(args, dict):
                continue
            raw = args.get("command", args.get("cmd"))
            if isinstance(raw, list):
                raw = " ".join(str(x) for x in raw)
            if not isinstance(raw, str) or not raw.strip() or raw.strip() in EDITOR_VERBS:
                continue
            text = folded(raw)
            entry = out.setdefault(text, (text, []))
            result = results.get(call.id)
            if result is None:
                continue
            output = result.text()
            errors = [] if VIEWERS.match(text) else [
                folded(line) for line in FAILURE.findall(output) if len(folded(line)) >= 12]
            if result.exit_code not in (None, 0) and not errors:
                lines = [folded(x) for x in output.splitlines() if x.strip()]
                errors = lines[-1:]
            entry[1].extend(errors)
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


def quality() -> None:
    if not SHARED_TRAJECTORIES.is_dir():
        print("  (../shared/data/trajectories not present: quality figures skipped)")
        return
    # figures[(fraction, variant)] -> lists
    sums: dict[tuple[float, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in sorted(SHARED_TRAJECTORIES.glob("*.json")):
        data = json.loads(path.read_text())
        history = [COUNTER.with_count(ConversationMessage.from_openai(m))
                   for m in data["messages"]]
        files = (data.get("meta") or {}).get("files_touched") or []
        full = build(history, 10**8, False).report.used
        for fraction in FRACTIONS:
            for variant, compact in (("compaction", True), ("naive", False)):
                s = sums[(fraction, variant)]
                s["builds"] += 1
                t = time.perf_counter()
                try:
                    built = build(history, int(full * fraction), compact)
                except BudgetError:
                    s["refused"] += 1
                    continue
                s["ms"] = max(s["ms"], (time.perf_counter() - t) * 1000)
                s["valid"] += not protocol_errors(built.messages[1:])
                s["within"] += built.report.used <= int(full * fraction)
                kept, users = user_intent(history, built)
                s["users_kept"] += kept
                s["users"] += users
                r = built.report
                if r.usable - r.totals["system"] - r.totals["tools"] >= ROOMY:
                    s["roomy_kept"] += kept
                    s["roomy_users"] += users
                    s["roomy"] += 1
                text = request_text(built)
                s["paths_kept"] += sum(p in text for p in files)
                s["paths"] += len(files)
                for key, value in kept_facts(history, text).items():
                    s[key] += value
                    if r.usable - r.totals["system"] - r.totals["tools"] >= ROOMY:
                        s["roomy_" + key] += value
    for fraction in FRACTIONS:
        for variant in ("compaction", "naive"):
            s = sums[(fraction, variant)]
            built = s["builds"] - s["refused"]
            label = f"{int(fraction * 100)}% of full size, {variant}"
            intent_target = {0.25: ">= 100 %", 0.10: ">= 90 %"}.get(fraction, "")
            path_target = {0.25: ">= 95 %", 0.10: ">= 90 %"}.get(fraction, "")
            if variant == "naive":
                intent_target = path_target = ""
            print(f"  {label}: {int(built)} builds ({int(s['refused'])} refused as too small)")
            report("    protocol valid", 100 * s["valid"] / max(1, built), "%",
                   "100 %" if variant == "compaction" else "")
            report("    within budget", 100 * s["within"] / max(1, built), "%",
                   "100 %" if variant == "compaction" else "")
            report("    user messages verbatim or in the digest",
                   100 * s["users_kept"] / max(1, s["users"]), "%", intent_target)
            report(f"      in the {int(s['roomy'])} builds with >= {ROOMY} tokens of room for "
                   "history", 100 * s["roomy_kept"] / max(1, s["roomy_users"]), "%")
            report("    files_touched paths present", 100 * s["paths_kept"] / max(1, s["paths"]),
                   "%", path_target)
            for key, name, targets in (
                    ("commands", "distinct commands kept (their text)", {0.25: 90, 0.10: 75}),
                    ("failures", "failing commands with their error text",
                     {0.25: 90, 0.10: 75}),
                    ("rules", "the user's constraint sentences verbatim",
                     {0.25: 100, 0.10: 95})):
                target = targets.get(fraction)
                report(f"    {name} (of {int(s[key])})",
                       100 * s[key + "_kept"] / max(1, s[key]), "%")
                report(f"      in the builds with >= {ROOMY} tokens of room (of "
                       f"{int(s['roomy_' + key])})",
                       100 * s["roomy_" + key + "_kept"] / max(1, s["roomy_" + key]), "%",
                       f">= {target} %" if target and variant == "compaction" else "")
            report("    slowest build", s["ms"], "ms")


def speed() -> None:
    msgs = big_messages()
    gc.freeze()  # as the window does once a conversation is open (app/controller.py)
    usable = 128_000 - 4096 - 2560
    full = build(msgs, 10**9, False).report.used
    build(msgs, usable, True)  # the process's first build pays one-time costs: not counted
    times, staged = [], []
    for _ in range(5):  # each a first build of the conversation (a new cache)
        t = time.perf_counter()
        built = build(msgs, usable, True)
        times.append((time.perf_counter() - t) * 1000)
        stages = {s["name"]: s["ms"] for s in built.report.stages}
        staged.append(sum(stages.get(k, 0.0) for k in ("tool outputs", "key messages",
                                                        "digest")))
    report(f"first build with compaction, {len(msgs):,} messages ({full:,} tokens -> "
           f"{built.report.used:,}), median of 5", median(times), "ms")
    report("  of which the no-LLM stages", median(staged), "ms", "< 100 ms")
    times = []
    cache = BuildCache()
    build(msgs, usable, True, cache)
    history = list(msgs)
    for i in range(6):
        history.append(COUNTER.with_count(ConversationMessage(role="user", content=f"more {i}")))
        t = time.perf_counter()
        build(history, usable, True, cache)
        times.append((time.perf_counter() - t) * 1000)
    report("  rebuild after one append, compaction active (kept, extended)", median(times),
           "ms", "< 10 ms")
    times = []
    for i in range(4):  # the compaction renewed (as when the kept one passes the trigger)
        history.append(COUNTER.with_count(ConversationMessage(role="user", content=f"now {i}")))
        t = time.perf_counter()
        build(history, usable - 1 - i, True, cache)
        times.append((time.perf_counter() - t) * 1000)
    report("  a new compaction after appends (per-entry work remembered)", median(times), "ms")


def run() -> None:
    print("compaction")
    speed()
    quality()

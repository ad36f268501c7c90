"""The digest: one message standing for every entry a build leaves out, made without any LLM.

What it holds, in the order it is cut last to first: the user's rules word for word (every
constraint sentence of the left-out requests, core/context/rules.py), the opening of every
request, the files read / written / edited / named, every distinct command with how it went (a
failure read from its output as a terminal shows it, core/context/failures.py: its kind, `exit
127, shell`, its error lines, what failed and the cause a runner nests, what followed and a
later run that resolved it), other errors, and the todo list when its latest change is left
out (core/todo.py). The facts and their fold over the left-out entries are core/context/fold.py's;
this module writes them as text and cuts it to size.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.context.failures import Failure, core_command, failure
from core.context.fold import Fold, Run, entry_line, one_line
from core.context.memo import CompactionMemo
from core.llm.tokens import TokenCounter

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

MAX_COMMANDS = 100  # the newest distinct commands of the left-out part; older ones are counted
MAX_ERRORS = 30
MAX_FILES = 150  # per verb
COMMAND_CHARS = 160  # of a command's text, in the digest
EARLIER_RUNS = 4  # of a command that went well at last: its runs looked at for a failure


def _command_lines(fold: Fold, memo: CompactionMemo) -> list[tuple[str, bool]]:
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


def _followed(run: Run, joint: str) -> str:
    """What the model or the user did after the run, as a digest line says it."""
    if run.followed is None:
        return ""
    who = "the user" if run.followed.role == "user" else "the model"
    return f"{joint}then {who}: {entry_line(run.followed)}"


def _failed(run: Run, memo: CompactionMemo) -> Failure | None:
    m = run.result
    if m is None:
        return None
    if m.id not in memo.failures:
        memo.failures[m.id] = failure(m.text(), m.exit_code, m.status, run.command)
    return memo.failures[m.id]


def _resolved_by(fold: Fold, number: int, memo: CompactionMemo) -> str:
    """The command of a later run with the same core (`go build ./...` for `go build ./...
    2>&1 | head`) that went well, if any."""
    core = core_command(fold.runs[number].command)
    for run in fold.runs[number + 1:]:
        if run.result is not None and core_command(run.command) == core:
            return "" if _failed(run, memo) else one_line(run.command, 80)
    return ""


def digest(fold: Fold, cap_tokens: int, counter: TokenCounter, memo: CompactionMemo,
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

"""The agent's side of the command line: a line per tool call, approvals on the terminal."""

from __future__ import annotations

import sys

from app.cli.term import for_stream
from core.engine import QuestionAsked
from core.model import ConversationMessage
from core.threads import in_daemon_thread


def tool_outcome(entry: ConversationMessage) -> str:
    """One line for a finished tool call: status, duration, exit code, what happened."""
    first = next((ln for ln in entry.text().splitlines()
                  if ln.strip() and not ln.startswith("[exit code")), "")
    first = first if len(first) <= 100 else first[:99] + "…"
    bits: list[str] = [entry.status or "ok"]
    if entry.exit_code is not None:
        bits.append(f"exit {entry.exit_code}")
    if entry.duration_ms is not None:
        bits.append(f"{entry.duration_ms} ms")
    if entry.offload is not None:
        bits.append(f"{entry.offload.size:,} bytes kept in .workbench/{entry.offload.path}")
    return f"{entry.tool_name or 'tool'}: {', '.join(bits)}: {first}"


async def ask_on_terminal(event: QuestionAsked) -> None:
    """An approval on the terminal: what would happen, then once / conversation / deny."""
    from core.tools.runner import ALLOW_CONVERSATION, ALLOW_ONCE, DENY

    q = event.question
    print(f"\n{q.text}\n{for_stream(q.detail, sys.stderr)}", file=sys.stderr)
    while True:
        print("Allow? [o]nce, for this [c]onversation, [d]eny (d: reason): ", end="",
              file=sys.stderr, flush=True)
        line = await _read_line()
        if not line:  # end of input: nobody can answer
            q.answer(DENY, "no answer (end of input)")
            return
        choice, _, reason = line.strip().partition(":")
        picked = {"o": ALLOW_ONCE, "c": ALLOW_CONVERSATION, "d": DENY}.get(choice.strip()[:1])
        if picked is not None:
            q.answer(picked, reason.strip())
            return


async def _read_line() -> str:
    """The next line of standard input, read on a thread the process does not wait for: Ctrl+C
    (which cancels the wait) ends the command at once, not at the next Enter."""
    def read() -> str:
        try:
            return sys.stdin.readline()
        except (OSError, ValueError):  # closed meanwhile: as the end of input
            return ""

    return await in_daemon_thread(read)

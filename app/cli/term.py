"""Text bound for a terminal: control characters made visible instead of obeyed.

A title or a message may hold ESC, NUL or other control bytes (an imported file, a model's
answer). Written to a terminal as they are, they move the cursor, recolour or clear the screen,
or worse; written to a file or a pipe they are data and stay as they are.
"""

from __future__ import annotations

import re
from typing import TextIO

# C0 controls except tab and newline, DEL, and the C1 controls (CSI and friends).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """`text` with each control character shown as a visible escape (`\\x1b`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def for_stream(text: str, stream: TextIO) -> str:
    """`text` escaped when `stream` is a terminal, unchanged otherwise."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return escape_controls(text) if tty else text

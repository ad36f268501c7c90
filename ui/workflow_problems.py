"""What the workflow editor makes of core's sentence about a workflow it refused: the words it
shows, and the step and field it puts the cursor in."""

from __future__ import annotations

import re

_STEPS_N = re.compile(r"\bsteps\.(\d+)(?:\.(\w+))?")
_DUPLICATE_ID = re.compile(r"the id '([^']*)'")
_STEP_ID = re.compile(r"step '([^']*)'")
_FIELD_LABELS = {"id": "Id", "title": "Title", "brief": "Brief", "done_when": "Done when",
                 "tools": "Tools", "max_rounds": "Max rounds", "depends_on": "Depends on"}


def in_words(message: str, titles: list[str]) -> str:
    """"Step 2 (Draft the notes): Brief is missing." rather than "the workflow:
    steps.2.brief is missing"; `titles`: the steps' titles, in order."""
    text = message.removeprefix("the workflow: ")
    if m := _STEPS_N.match(text):
        n = int(m.group(1))
        title = titles[n - 1].strip() if 0 < n <= len(titles) else ""
        place = f"Step {n}" + (f" ({title})" if title else "")
        field = _FIELD_LABELS.get(m.group(2) or "", "")
        rest = text[m.end():].strip()
        return f"{place}: {field} {rest}." if field else f"{place}: {rest}."
    if text.startswith("name is missing"):
        return "The workflow needs a name."
    return text[:1].upper() + text[1:] + "."


def where(message: str, ids: list[str]) -> tuple[int, str]:
    """(the row of the step the message names, or -1; the field it names, or "")."""
    if m := _STEPS_N.search(message):
        return int(m.group(1)) - 1, m.group(2) or ""
    if (m := _DUPLICATE_ID.search(message)) and m.group(1) in ids:
        return len(ids) - 1 - ids[::-1].index(m.group(1)), "id"  # the later of the two
    if (m := _STEP_ID.search(message)) and m.group(1) in ids:
        return ids.index(m.group(1)), ""
    if message.startswith("the workflow: name"):
        return -1, "name"
    return -1, ""

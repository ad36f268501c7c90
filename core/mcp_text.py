"""What the MCP hub says in words: a server's name checked, an error as a sentence, a tool's
schema checked, a call's result as the text the model reads (core.mcp)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

SEP = "__"  # a tool is offered as <server>__<tool>
NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a server, or None. The server is found again from a tool's name
    (`<server>__<tool>`), so a name holds no "__" and does not end in "_": two servers can then
    never offer one tool name, and a server's switch finds all its tools."""
    if not NAME.fullmatch(name):
        return "a name is letters, digits, '-' or '_' (40 at most)"
    if SEP in name or name.endswith("_"):
        return (f"a name may not hold {SEP!r} or end in '_' (its tools are named "
                f"<server>{SEP}<tool>, and another server's could have the same name)")
    return None


def describe_error(e: BaseException) -> str:
    """An exception as a sentence (an ExceptionGroup from the SDK's task groups: its first
    real cause)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, TimeoutError | asyncio.TimeoutError):
        return "it did not answer in time"
    if isinstance(e, FileNotFoundError):
        return f"the command was not found ({e.filename or e})"
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return "its input schema is not a JSON object schema"
    try:
        from jsonschema import Draft202012Validator
        Draft202012Validator.check_schema(schema)
    except Exception as e:  # the validator's own error types
        return f"its input schema is invalid ({str(e).splitlines()[0][:120]})"
    return None


def result_parts(result: Any) -> list[str]:
    """A call's content as the pieces of text the model reads (text as is; other kinds
    named), joined by line ends."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            parts.append(f"[an image ({block.mimeType}) the tool returned; not shown here]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[a resource: {inner.uri}]")
        else:
            parts.append(f"[{kind or 'content'} the tool returned]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False, indent=1))
    return parts or ["(no output)"]


def result_text(result: Any) -> str:
    """A call's content as the text the model reads."""
    return "\n".join(result_parts(result))

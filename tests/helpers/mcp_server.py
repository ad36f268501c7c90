"""A real MCP server made with the SDK's FastMCP, for the tests: over stdio (`python -m
tests.helpers.mcp_server`) or streamable HTTP on loopback (`... http PORT`).

Tools: add (two integers), echo (read-only), shout (writes nothing, but not marked read-only),
env_token (reports the MCP_TOKEN it was given), crash (the process dies mid-call), hang (never
answers within a test's patience)."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("test-tools")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def shout(text: str) -> str:
    """Say the text back, louder."""
    return text.upper()


@server.tool()
def env_token() -> str:
    """The token this server was started with."""
    return f"token is {os.environ.get('MCP_TOKEN', '(none)')}"


@server.tool()
def crash() -> str:
    """Stop the server process at once."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Sleep for a long time."""
    time.sleep(seconds)
    return "woke up"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.settings.port = int(sys.argv[2])
        server.run(transport="streamable-http")
    else:
        server.run(transport="stdio")

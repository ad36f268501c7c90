"""A real MCP server (FastMCP, stdio) that misbehaves on request, for the key and limit tests:
`python -m tests.helpers.mcp_probe [MODE ...]`.

Modes: (none) the probe tools below; `garbage`: writes lines that are not JSON-RPC on its
output; `named TOOL`: offers one tool, named TOOL, that says which server it is (`SERVER_ID`).

The probe tools: token (reports MCP_TOKEN), big (a result of `mb` megabytes), hang. Its
description quotes DESCRIBE; with PRINT_ENV set, it prints MCP_TOKEN and LONG_TOKEN to stderr
as it starts."""

from __future__ import annotations

import json
import os
import sys
import time

from mcp.server.fastmcp import FastMCP

server = FastMCP("probe")


def token() -> str:
    return f"token={os.environ.get('MCP_TOKEN', '(none)')}"


def big(mb: float) -> str:
    line = "y" * 99 + "\n"
    return line * int(mb * 2**20 / len(line))


def hang(seconds: float = 3600) -> str:
    time.sleep(seconds)
    return "woke up"


def named() -> str:
    return f"server {os.environ.get('SERVER_ID', '?')} ran"


if __name__ == "__main__":
    mode = sys.argv[1:] or ["probe"]
    if mode[0] == "garbage":
        print("Starting the probe server on port 8080...", flush=True)
        print("this is not JSON-RPC", flush=True)
        time.sleep(60)
        sys.exit(0)
    if mode[0] == "named":
        server.add_tool(named, name=mode[1], description="Say which server ran.")
    else:
        server.add_tool(token, description=f"The token. {os.environ.get('DESCRIBE', '')}")
        server.add_tool(big, description="A large result.")
        server.add_tool(hang, description="Sleep for a long time.")
    if os.environ.get("PRINT_ENV"):
        print(json.dumps({k: os.environ.get(k) for k in ("MCP_TOKEN", "LONG_TOKEN")}),
              file=sys.stderr, flush=True)
    server.run(transport="stdio")

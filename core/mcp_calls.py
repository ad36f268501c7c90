"""A call to an MCP server's tool, and what the model is told when there is none (the server
timed out and is restarting, crashed and is stopped): the calls part of `core.mcp.McpHub`."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from core.mcp_state import ServerState
from core.mcp_stdio import Said
from core.mcp_text import SEP, describe_error, result_text
from core.redact import redact

CALL_TIMEOUT = 120.0  # a call without an answer by then is answered "timed out"


class ToolCalls:
    """Calls, for McpHub (which holds these attributes and restarts a server)."""

    servers: dict[str, ServerState]
    _said: dict[str, Said]
    _restarting: set[str]
    _restarts: set[asyncio.Future[None]]

    async def restart(self, name: str) -> None:
        raise NotImplementedError

    async def call(self, server: str, tool: str, arguments: dict[str, Any]
                   ) -> tuple[str, bool]:
        """Call a tool; returns (the text the model reads, whether it is an error). Never
        raises for what the server does: a crash, a time-out or an error is said."""
        result = await self.call_result(server, tool, arguments)
        if isinstance(result, str):
            return result, True
        return redact(result_text(result)), bool(result.isError)

    async def call_result(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Call a tool; returns the SDK's result, or the sentence the model reads when there
        is none (a crash, a time-out, a server not running). Never raises for what the server
        does."""
        s = self.servers.get(server)
        timeout = (s.config.timeout if s is not None else None) or CALL_TIMEOUT
        if s is None or s.status != "ready" or s.session is None:
            return self._not_running(server, tool)
        try:
            return await s.session.call_tool(tool, arguments,
                                             read_timeout_seconds=timedelta(seconds=timeout))
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as e:  # the server's failure, said
            said = self._said.get(server)
            why = said.why if said is not None and said.why else describe_error(e)
            if "timed out" in why.lower() or isinstance(e, TimeoutError):
                # it may still be busy with the call (a server that handles one at a time is
                # stuck): started again, so the next call finds it answering
                s.status, s.error = "failed", f"it did not answer a call within {timeout:g} s"
                self._restart_later(server)
                return (f"The MCP server {server!r} did not answer {tool!r} within "
                        f"{timeout:g} s; the call was given up and the server is being "
                        "started again.")
            s.status, s.error = "failed", f"it stopped during a call ({why})"
            if s.stop is not None:
                s.stop.set()
            return (f"The MCP server {server!r} failed during the call to {tool!r} ({why}); "
                    "it is stopped. Tell the user; Settings can restart it.")

    def unavailable(self, name: str) -> str | None:
        """What the model is told of a call to `name` that no tool offered answers: its
        server's state ("restarting", "stopped") when `name` is one of our servers' tools,
        None otherwise."""
        for server in self.servers.values():
            if name.startswith(f"{server.name}{SEP}") and server.status != "ready":
                return self._not_running(server.name, name[len(server.name) + len(SEP):])
        return None

    def _not_running(self, server: str, tool: str) -> str:
        s = self.servers.get(server)
        if s is None:
            return (f"The MCP server {server!r} is not configured; the tool {tool!r} did not "
                    "run.")
        if server in self._restarting or s.status in ("starting", "not started"):
            doing = f"restarting ({s.error})" if server in self._restarting and s.error else \
                "restarting" if server in self._restarting else "starting"
            return (f"The MCP server {server!r} is {doing}; its tool {tool!r} did not run. Try "
                    "it again in a moment.")
        return (f"The MCP server {server!r} is stopped ({s.error or 'it failed'}); its tool "
                f"{tool!r} did not run. Tell the user; Settings can restart it.")

    def _restart_later(self, server: str) -> None:
        """Start `server` again in the background (`close` cancels and awaits it)."""
        self._restarting.add(server)
        restart = asyncio.ensure_future(self.restart(server))
        self._restarts.add(restart)

        def done(f: asyncio.Future[None]) -> None:
            self._restarts.discard(f)
            self._restarting.discard(server)
            if not f.cancelled():
                f.exception()  # a failed start is the server's state, said there

        restart.add_done_callback(done)

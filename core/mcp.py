"""MCP servers as tool sources, through the official `mcp` SDK (stdio and streamable HTTP).

Configuration is the `mcpServers` shape other clients use (Claude Desktop, Cursor), so a user
can copy theirs: `mcp.json` in the config folder, then `.workbench/mcp.json` in the project
(a project's server of the same name wins):

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@scope/server"],
                              "env": {"TOKEN": "..."}, "cwd": "..."},
                    "search": {"url": "http://127.0.0.1:8765/mcp", "headers": {...}}}}

Two more keys of ours per server: `"autoApproveReadOnly": true` lets the tools its server marks
`readOnlyHint` run without asking (off unless the user says so, and only in the user's own
file: a project cannot relax approvals); `"timeout": 30` gives its
calls that many seconds (default CALL_TIMEOUT).

The `McpHub` starts the servers lazily (the first time an agent or run turn needs tools), each
in a task of the engine's loop that holds its connection; a server that cannot start, crashes,
hangs or lists an unusable schema becomes a state in plain words, and a call to it a tool result
the model reads. Tools are offered as `server__tool`, in a fixed order (servers by name, their
tools by name), so the request's prefix stays the same from turn to turn. A server's name holds
no `__` and does not end in `_` (core.mcp_text.name_problem), so no two servers offer one name.
The values of its `env` and `headers` are keys (core.redact.remember): they are redacted from its
tools' descriptions and results and from its stderr log, as from everything else. What each server
listed is kept in `.workbench/mcp-tools.json`, so the meter and `workbench context` count the
tools before a server is started. Commands of stdio servers run with the user's rights: they are
not sandboxed by us, and so a project's own servers start only once the user trusts the project
(core.trust).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import confined
from core.mcp_calls import CALL_TIMEOUT as CALL_TIMEOUT  # its home is core.mcp_calls
from core.mcp_calls import ToolCalls
from core.mcp_state import McpToolInfo, ServerConfig, ServerState
from core.mcp_stdio import Launch, Said, quiet_sdk, stdio_streams
from core.mcp_text import SEP as SEP  # its home is core.mcp_text
from core.mcp_text import describe_error, name_problem, schema_problem
from core.redact import SECRET_NAME, redact, redact_value, remember
from core.store.fileio import atomic_write_json

CONFIG_FILE = "mcp.json"
MAX_CONFIG = 2**20
MAX_LOG = 16 * 2**20  # a server's log, read for its last line when it failed
TOOLS_CACHE = "mcp-tools.json"
LOGS_DIR = "mcp-logs"
START_TIMEOUT = 30.0  # a server that has not listed its tools by then has failed
MAX_NAME = 64  # OpenAI's limit on a function's name

_SECRET_HEADER = re.compile(r"auth|key|cookie", re.IGNORECASE)  # besides core.redact's names
def load_config(paths: list[Path]) -> tuple[dict[str, ServerConfig], list[str]]:
    """The servers of the config files, later files winning by name; and the problems found,
    one sentence each (a broken entry is left out, the others still start)."""
    servers: dict[str, ServerConfig] = {}
    problems: list[str] = []
    for path in paths:
        try:
            # The user's own file may be a link (to dotfiles); either file must be a regular one.
            data = json.loads(confined.read(path, MAX_CONFIG, root=None).decode("utf-8"))
        except confined.Refused as e:
            if not e.missing:
                problems.append(f"{e}; its servers are not started")
            continue
        except (OSError, ValueError) as e:
            problems.append(f"{path} could not be read ({e}); its servers are not started")
            continue
        entries = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            problems.append(f'{path} has no "mcpServers" object; its servers are not started')
            continue
        for name, raw in entries.items():
            if not isinstance(raw, dict):
                problems.append(f"MCP server {name!r} in {path} must be an object with a "
                                '"command" or a "url"')
                continue
            try:
                config = ServerConfig.model_validate(raw)
            except ValidationError as e:
                why = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
                problems.append(f"MCP server {name!r} in {path}: {why}")
                continue
            if bool(config.command) == bool(config.url):
                problems.append(f"MCP server {name!r} in {path} needs either a command or a "
                                "url" + (", not both" if config.command else ""))
                continue
            if (bad := name_problem(name)) is not None:
                problems.append(f"MCP server {name!r} in {path}: {bad}; it is not started")
                continue
            servers[name] = config
    return dict(sorted(servers.items())), problems


def load_servers(paths: list[Path], trusted: Mapping[str, Any] | None
                 ) -> tuple[dict[str, ServerConfig], list[str]]:
    """The servers of `paths` (the user's file, then the project's): of the project's, only
    those the user trusted exactly as they are now (`trusted`: their entries as trusted; None
    while the project is not trusted), and never with an approval relaxation. A project is a
    folder from anywhere: only the user's own file may let tools run unasked."""
    user, project = paths[0], paths[1:]
    own, problems = load_config([user])
    shipped, shipped_problems = load_config(project)
    servers = dict(own)
    untrusted = []
    for name, config in shipped.items():
        raw = (trusted or {}).get(name)
        try:
            same = raw is not None and ServerConfig.model_validate(raw) == config
        except ValidationError:
            same = False
        if same:
            servers[name] = config
        else:
            untrusted.append(name)
    if trusted is not None:
        problems += shipped_problems
    if untrusted:
        why = ("the project is not trusted" if trusted is None else
               "they changed since you trusted the project; open it again to review them")
        problems.append(f"the project's MCP servers ({', '.join(untrusted)}) are not started: "
                        f"{why} (File → Trust this project…, or `workbench trust`)")
    servers = dict(sorted(servers.items()))
    for name, config in servers.items():
        if config.auto_approve_read_only and own.get(name) != config:
            servers[name] = config.model_copy(update={"auto_approve_read_only": False})
            problems.append(
                f"autoApproveReadOnly of MCP server {name!r} is not honoured in a project's "
                "mcp.json: only the mcp.json of your config folder can let tools run unasked")
    return servers, problems


def tool_name(server: str, tool: str) -> str:
    name = f"{server}{SEP}{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"
    return name[:MAX_NAME]


class McpHub(ToolCalls):
    """The project's MCP servers: started together, once, on the engine's loop.

    Attributes:
        servers: by name, in a fixed order.
        problems: what the configuration files got wrong.
    """

    def __init__(self, servers: dict[str, ServerConfig], problems: list[str],
                 state_dir: Path | None, cwd: Path | None = None) -> None:
        self.servers = {name: ServerState(name, c) for name, c in servers.items()}
        self.problems = problems
        self.state_dir = state_dir
        self.cwd = cwd
        self._cache = self._read_cache()
        self._starting: asyncio.Task[None] | None = None
        self.config_paths: list[Path] = []  # read again by a restart
        self._restarts: set[asyncio.Future[None]] = set()  # restarts under way (kept alive)
        # The project's entries as the user trusted them (core.trust); None: not trusted.
        self.trusted: Mapping[str, Any] | None = None
        self._said: dict[str, Said] = {}  # what each stdio server's transport found wrong
        self._restarting: set[str] = set()  # servers a restart is under way for
        remember(self.secrets())  # never written, sent or printed, from now on

    @classmethod
    def for_project(cls, root: Path, state: Path, config_dir: Path,
                    trusted: Mapping[str, Any] | None = None) -> McpHub:
        """The user's servers and, of the project's own, those the user trusted (core.trust):
        `trusted` holds their entries exactly as trusted (None: the project is not trusted)."""
        paths = [config_dir / CONFIG_FILE, state / CONFIG_FILE]
        servers, problems = load_servers(paths, trusted)
        hub = cls(servers, problems, state, root)
        hub.config_paths = paths
        hub.trusted = trusted
        return hub

    # --- what is offered -------------------------------------------------------------------------

    def tools(self) -> list[McpToolInfo]:
        """Every tool the servers offer, in the fixed order: a started server's own list,
        else the one it gave when last started (kept on disk); a failed server offers none."""
        out: list[McpToolInfo] = []
        for s in self.servers.values():
            if s.status == "ready":
                out += s.tools
            elif s.status != "failed":
                out += self._cached(s)
        return _one_of_each(out)

    def secrets(self) -> list[str]:
        """Values of the servers' `env` and `headers`, never written, sent or printed: those
        named like a secret (`MCP_TOKEN`, `Authorization`, `X-API-Key`) whatever their length
        (from core.redact.MIN_KNOWN), the others from 8 characters (a shorter one is a flag or
        a word, `DEBUG=1`, `NODE_ENV=test`, that would be redacted wherever it is said)."""
        return [v for s in self.servers.values() for k, v in
                (*s.config.env.items(), *s.config.headers.items())
                if SECRET_NAME.search(k) or _SECRET_HEADER.search(k) or len(v) >= 8]

    def _cached(self, s: ServerState) -> list[McpToolInfo]:
        entry = self._cache.get(s.name)
        if not isinstance(entry, dict) or entry.get("config") != s.config.fingerprint():
            return []
        try:
            infos = [_redacted(McpToolInfo(**t)) for t in entry.get("tools", [])]
        except TypeError:
            return []
        # what the file says is the server's own: its name, and tool names made from it
        return [t for t in infos if t.server == s.name and t.name == tool_name(s.name, t.tool)]

    def _read_cache(self) -> dict[str, Any]:
        if self.state_dir is None:
            return {}
        try:
            data = json.loads(confined.read(TOOLS_CACHE, MAX_CONFIG, root=self.state_dir))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _keep(self, s: ServerState) -> None:
        if self.state_dir is None:
            return
        self._cache[s.name] = {"config": s.config.fingerprint(),
                               "tools": [t.__dict__ for t in s.tools]}
        try:
            atomic_write_json(self.state_dir / TOOLS_CACHE, self._cache, indent=1,
                              durable=False)
        except OSError:
            pass  # a cache: the next start lists them again

    # --- starting and stopping -------------------------------------------------------------------

    async def start(self) -> None:
        """Start every server not started yet and wait until each is ready or has failed (at
        most START_TIMEOUT each, together). Safe to call again: it waits for the same start."""
        if self._starting is None or self._starting.done() and any(
                s.status == "not started" for s in self.servers.values()):
            self._starting = asyncio.ensure_future(self._start_all())
        await asyncio.shield(self._starting)

    async def _start_all(self) -> None:
        waits = []
        for s in self.servers.values():
            if s.status != "not started":
                continue
            ready = asyncio.Event()
            s.status, s.stop = "starting", asyncio.Event()
            s.task = asyncio.ensure_future(self._serve(s, ready))
            waits.append(ready.wait())
        if waits:
            await asyncio.gather(*waits)

    async def _serve(self, s: ServerState, ready: asyncio.Event) -> None:
        """Hold one server's connection: open, list its tools, wait to be stopped."""
        assert s.stop is not None
        try:
            async with AsyncExitStack() as stack:
                # asyncio.timeout, not wait_for: the SDK's contexts must be left in the task
                # that entered them (wait_for would run them in a task of its own).
                async with asyncio.timeout(START_TIMEOUT):
                    streams = await self._connect(s, stack)
                    from mcp import ClientSession

                    session = await stack.enter_async_context(ClientSession(*streams))
                    await session.initialize()
                    listed = await session.list_tools()
                s.tools, skipped = self._infos(s, listed.tools)
                s.session, s.status, s.error = session, "ready", ""
                if skipped:
                    s.error = "; ".join(skipped)
                self._keep(s)
                ready.set()
                await s.stop.wait()
        except (asyncio.CancelledError, KeyboardInterrupt):
            s.status = "failed"
            s.error = s.error or "stopped"
            raise
        except BaseException as e:  # whatever the server did: a state, said
            if s.status != "failed":
                s.status, s.error = "failed", self._why(s, e)
        finally:
            s.session = None
            if s.status == "ready":
                s.status = "not started"  # stopped: a later start opens it again
            ready.set()

    async def _connect(self, s: ServerState, stack: AsyncExitStack) -> tuple[Any, Any]:
        c = s.config
        quiet_sdk()
        if c.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = await stack.enter_async_context(
                create_mcp_http_client(headers=c.headers or None))
            read, write, _ = await stack.enter_async_context(
                streamable_http_client(c.url, http_client=client))
            return read, write
        launch = Launch(c.command or "", c.args, c.env or None,
                        c.cwd or (str(self.cwd) if self.cwd else None))
        said = self._said[s.name] = Said()
        return await stack.enter_async_context(stdio_streams(launch, self._log(s), said))

    def _log(self, s: ServerState) -> Path | None:
        """Where a stdio server's stderr goes (redacted): `.workbench/mcp-logs/<name>.log`
        (the last lines say why it failed); None: our stderr."""
        if self.state_dir is None:
            return None
        folder = self.state_dir / LOGS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{s.name}.log"

    def _why(self, s: ServerState, e: BaseException) -> str:
        said = self._said.get(s.name)
        if said is not None and said.why:  # the transport's reason is the real one
            return said.why
        why = describe_error(e)
        if self.state_dir is not None and s.config.command:
            try:
                lines = confined.read(self.state_dir / LOGS_DIR / f"{s.name}.log", MAX_LOG,
                                      root=None).decode("utf-8", "replace").strip().splitlines()
            except OSError:
                lines = []
            if lines:
                why += f" (its last output: {lines[-1][:200]})"
        return why

    def _infos(self, s: ServerState, listed: list[Any]) -> tuple[list[McpToolInfo], list[str]]:
        out, skipped, seen = [], [], set()
        for t in sorted(listed, key=lambda t: t.name):
            problem = schema_problem(t.inputSchema)
            name = tool_name(s.name, t.name)
            if problem is None and name in seen:
                problem = "its name repeats another's"
            if problem is not None:
                skipped.append(f"tool {t.name!r} left out: {problem}")
                continue
            seen.add(name)
            hints = getattr(t, "annotations", None)
            out.append(_redacted(McpToolInfo(
                s.name, t.name, name, (t.description or "").strip(), dict(t.inputSchema),
                bool(hints is not None and hints.readOnlyHint))))
        return out, skipped

    async def close(self) -> None:
        """Stop every server (their processes end); waits a little for each. A restart under
        way (a timed-out call's) is cancelled first: nothing outlives the close."""
        await self._cancel_starts()
        for s in self.servers.values():
            if s.stop is not None:
                s.stop.set()
        tasks = [s.task for s in self.servers.values() if s.task is not None]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=5)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2)
        for s in self.servers.values():
            s.task, s.stop = None, None
            s.status = "not started" if s.status != "failed" else s.status
        self._starting = None

    async def _cancel_starts(self) -> None:
        """Cancel the restarts under way and a start not yet begun, and wait for them."""
        pending = [*self._restarts]
        if self._starting is not None and not self._starting.done():
            pending.append(self._starting)
        for f in pending:
            f.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10)

    async def close_keeping_states(self) -> None:
        """Stop every server but keep what each was (ready with its tools, failed and why):
        for a listing made and then shown."""
        kept = {n: (s.status, s.error, s.tools) for n, s in self.servers.items()}
        await self.close()
        for n, (status, error, tools) in kept.items():
            s = self.servers[n]
            s.status, s.error, s.tools = status, error, tools

    async def restart(self, name: str) -> None:
        """Stop the server and start it again, with its entry as the files say now (an edit
        of mcp.json applies)."""
        s = self.servers[name]
        if s.stop is not None:
            s.stop.set()
        if s.task is not None:
            await asyncio.wait([s.task], timeout=5)
        if self.config_paths:
            configs, self.problems = load_servers(self.config_paths, self.trusted)
            s.config = configs.get(name, s.config)
        s.status, s.error, s.task, s.stop = "not started", "", None, None
        self._starting = None
        await self.start()

def _redacted(info: McpToolInfo) -> McpToolInfo:
    """`info` without a key in its description or schema (a server may quote its token
    there): what is offered, kept in mcp-tools.json and shown."""
    description, schema = redact(info.description), redact_value(info.schema)
    if description == info.description and schema == info.schema:
        return info
    return McpToolInfo(info.server, info.tool, info.name, description, schema, info.read_only)


def _one_of_each(tools: list[McpToolInfo]) -> list[McpToolInfo]:
    """`tools` with a name offered once only: a second tool of one name (which server names
    rule out: see core.mcp_text.name_problem) is left out, never offered twice."""
    seen: set[str] = set()
    out = []
    for t in tools:
        if t.name not in seen:
            seen.add(t.name)
            out.append(t)
    return out

"""The tools a request offers, in the Context Inspector: ours and each MCP server's, with what
each schema costs; an MCP tool or a whole server switched off (and on) for one conversation.

A switch is kept with the conversation (`tools_off` in its conversation.json); the next
request's prefix changes once (a new compaction names it), never on every turn.
"""

from __future__ import annotations

from typing import Protocol

from app.window.conversation_settings import set_conversation
from app.window.meter import UsageMeter
from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from app.window.turns import TurnRunner
from core.context.report import BuildReport
from core.engine import Engine
from core.mcp import SEP, McpHub
from core.model import ConversationMessage
from core.store.errors import StoreError
from core.store.project import Project
from ui.main_window import MainWindow

OURS = "Context Workbench"


class ToolsHost(Protocol):
    project: Project | None
    current_id: str | None
    engine: Engine | None
    settings_flow: SettingsFlow
    turns: TurnRunner

    def refresh_usage(self) -> None: ...
    def history(self, conv_id: str) -> list[ConversationMessage]: ...


class ToolsFlow:
    def __init__(self, window: MainWindow, notices: Notices, host: ToolsHost,
                 meter: UsageMeter) -> None:
        self.window = window
        self.notices = notices
        self.host = host
        self.meter = meter
        self.panel = window.inspector
        self.panel.tool_toggled.connect(self.toggle)
        self.panel.visibilityChanged.connect(lambda visible: self.show() if visible else None)
        meter.listeners.append(self.show)
        self._states: list[tuple[str, str, str]] | None = None  # as Settings last showed them
        host.settings_flow.mcp_states = self.states
        host.settings_flow.restart_mcp = self.restart

    # --- Settings: the servers and their states --------------------------------------------------

    def states(self) -> list[tuple[str, str, str]]:
        """The servers' states for Settings (asked while it is open); a change (a restart
        done, a server failed) is counted by the meter at once."""
        context = self.meter.context
        hub = context.mcp if context is not None else None
        if hub is None:
            return []
        lines = [(s.name, s.config.describe(), s.line()) for s in hub.servers.values()]
        if self._states is not None and lines != self._states:
            self.host.refresh_usage()
        self._states = lines
        return lines + [("(configuration)", "", p) for p in hub.problems]

    def restart(self, name: str) -> None:
        """Settings' Restart: on the engine's loop, where the servers live."""
        engine = self.host.engine
        hub = engine.context.mcp if engine is not None else None
        if engine is None or hub is None or name not in hub.servers:
            return
        self.host.turns.worker.call_soon(hub.restart(name))

    def show(self) -> None:
        """After each build: the tools of the request the meter built, by source."""
        report, context = self.meter.report, self.meter.context
        if report is None or context is None or not self.panel.isVisible():
            return
        hub = context.mcp
        servers = list(hub.servers) if hub is not None else []
        groups = _groups(report, hub, servers)
        notes = {}  # a server that offers nothing says why (failed, not started yet)
        for server in servers:
            state = hub.servers[server] if hub is not None else None
            if state is not None and not groups[server] and state.status != "ready":
                notes[server] = state.line()
        switchable = (set(servers) - set(notes)) | {n for s in servers for n, *_ in groups[s]}
        self.panel.show_tools([(source, tools, notes.get(source, ""))
                               for source, tools in groups.items()
                               if tools or source in servers and report.mode != "chat"],
                              switchable)

    def toggle(self, name: str, on: bool) -> None:
        """Offer the tool (or the server's tools: `name` is a server's) again, or not."""
        project, conv, context = self.host.project, self.host.current_id, self.meter.context
        if project is None or conv is None or context is None:
            return
        hub = context.mcp
        key = f"{name}{SEP}*" if hub is not None and name in hub.servers else name
        try:
            off = [n for n in project.conversations.meta(conv).tools_off if n != key]
        except StoreError as e:
            self.notices.warning(f"Not changed: {e}")
            return
        if key.endswith(f"{SEP}*"):  # the server as a whole: its own switches go
            off = [n for n in off if not n.startswith(key[:-1])]
        if not on:
            off.append(key)
        if set_conversation(project, conv, self.notices, "Not changed",
                            tools_off=sorted(set(off))):
            self.host.refresh_usage()


def _groups(report: BuildReport, hub: McpHub | None, servers: list[str]
            ) -> dict[str, list[tuple[str, int, bool]]]:
    """Source (ours, then each server) -> its tools as (name, tokens, offered): those the
    request offers, and (outside chat) those switched off, listed to be switched on."""
    off = set(report.tools_off)
    groups: dict[str, list[tuple[str, int, bool]]] = {OURS: []}
    for server in servers:
        groups[server] = []
    offered = set()
    server_of = {i.name: i.server for i in hub.tools()} if hub is not None else {}
    for name, tokens in report.tools_offered:
        server = server_of.get(name) or next(  # as listed; else by its server's prefix
            (x for x in servers if name.startswith(f"{x}{SEP}")), "")
        groups[server if server in groups else OURS].append((name, tokens, True))
        offered.add(name)
    if hub is not None and report.mode != "chat":  # switched off: listed, to switch on
        for info in hub.tools():
            if info.name not in offered and (info.name in off or
                                             f"{info.server}{SEP}*" in off):
                groups[info.server].append((info.name, 0, False))
    return groups

"""Agent mode in the window: the agent picker, the sandbox note, the todo list, full outputs.

The project's agents are read when it opens (problems with an agent file go to the notice);
the chosen agent is the conversation's (kept in its conversation.json). The todo list is the
replay of the log (core.tools.todo), refreshed when a todo call's result arrives. An offloaded
output is read from `.workbench/tool-results/` here and shown in a viewer, the first part of a
huge one only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.window.conversation_settings import set_conversation
from app.window.notices import Notices
from core.agents import DEFAULT, Agent, find_agent, load_agents
from core.model import ConversationMessage
from core.tools.results import kept_output
from core.tools.sandbox import Sandbox, detect_sandbox
from core.tools.todo import TODO_TOOL, todo_state
from ui.main_window import MainWindow

if TYPE_CHECKING:
    from core.store.project import Project

VIEW_BYTES = 4 * 2**20  # the viewer shows at most this much of an output


class AgentFlow(QObject):
    """Attributes:
        agents: the open project's agents (the default first).
        sandbox: what contains commands on this machine.
    """

    def __init__(self, window: MainWindow, notices: Notices) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.agents: list[Agent] = [DEFAULT]
        self.sandbox: Sandbox | None = None
        self._project: Project | None = None
        self._conv: str | None = None
        window.mode_switcher.agent_changed.connect(self._on_agent_changed)
        window.mode_switcher.network_changed.connect(self._on_network_changed)

    def project_opened(self, project: Project) -> list[str]:
        """Read the project's agents; returns the problems found (one sentence each)."""
        self._project = project
        self.agents, problems = load_agents(project.state, project.trusted)
        if self.sandbox is None:
            self.sandbox = detect_sandbox()
        short = ("commands: bubblewrap sandbox" if self.sandbox.kind == "bubblewrap"
                 else "commands: no sandbox")
        self.window.mode_switcher.set_protection(short, self.sandbox.describe(),
                                                 self.sandbox.kind == "bubblewrap")
        self.window.mode_switcher.set_agents(
            [a.name for a in self.agents], DEFAULT.name,
            {a.name: a.description or a.instructions[:200] for a in self.agents})
        return problems

    def conversation_shown(self, conv_id: str, agent_name: str | None,
                           messages: list[ConversationMessage], network: bool = False) -> None:
        self._conv = conv_id
        self.window.mode_switcher.set_network(network)
        agent = find_agent(self.agents, agent_name)
        self.window.mode_switcher.set_agents([a.name for a in self.agents], agent.name)
        self.show_todo(messages)

    def agent(self) -> Agent:
        return find_agent(self.agents, self.window.mode_switcher.agent())

    def _on_agent_changed(self, name: str) -> None:
        agent = find_agent(self.agents, name)
        set_conversation(self._project, self._conv, self.notices,
                         "The agent choice could not be saved",
                         agent=None if agent is DEFAULT else agent.name)

    def _on_network_changed(self, allowed: bool) -> None:
        set_conversation(self._project, self._conv, self.notices,
                         "The network choice could not be saved", allow_network=allowed)

    # --- the todo list ---------------------------------------------------------------------------

    def show_todo(self, messages: list[ConversationMessage]) -> None:
        self.window.todo.set_items([(i.text, i.status) for i in todo_state(messages)])

    def entry_appended(self, entry: ConversationMessage) -> None:
        """A todo call's result: the list changed."""
        if entry.role == "tool" and entry.tool_name == TODO_TOOL and self._project and self._conv:
            self.show_todo(self._project.conversations.load(self._conv).messages)

    # --- full outputs ----------------------------------------------------------------------------

    def open_output(self, entry: ConversationMessage) -> None:
        if self._project is None or entry.offload is None:
            return
        try:
            with kept_output(self._project.state, entry.offload) as f:
                data = f.read(VIEW_BYTES)
                size = os.fstat(f.fileno()).st_size
        except OSError as e:  # Refused among them: outside tool-results/, gone, a FIFO
            self.window.show_warning("Output not available",
                                     f"The full output is not opened: {e.strerror or e}. The "
                                     "conversation keeps its preview.")
            return
        note = f"{self._project.state / entry.offload.path} · {size:,} bytes"
        if size > len(data):
            note += f" · showing the first {len(data):,} bytes (open the file for the rest)"
        self.window.show_output(f"{entry.tool_name or 'tool'} output", note,
                                data.decode("utf-8", errors="replace"))

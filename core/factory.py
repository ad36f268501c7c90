"""One way to assemble the core for a project, for the window and the command line alike."""

from __future__ import annotations

from core.context.calibration import Calibration
from core.context.prompts import PromptComposer
from core.context.service import ContextService
from core.engine import Engine, ToolSetup
from core.llm.adapter import LLMClient
from core.settings import SettingsStore
from core.store.project import Project


def calibration_for(settings: SettingsStore) -> Calibration:
    """Per-model calibration and provider-stated limits, beside the global settings."""
    return Calibration(settings.folder / "calibration.json")


def context_service(project: Project, calibration: Calibration | None = None,
                    ask_servers: bool = True) -> ContextService:
    """The context service for `project` (its prompt overrides, the shared calibration).
    `ask_servers=False` for the window's thread: it never waits on a server."""
    return ContextService(project.conversations, PromptComposer(project.state / "prompts"),
                          calibration, ask_servers=ask_servers, offer_tools=True)


def build_engine(project: Project, calibration: Calibration | None = None,
                 client: LLMClient | None = None) -> Engine:
    """The turn engine for `project`: its context service, its tools (the project folder is
    where they work) and request copies kept in `.workbench/requests/`, unless the project is
    read-only."""
    return Engine(project.conversations, client,
                  requests_dir=None if project.read_only else project.state / "requests",
                  context=context_service(project, calibration),
                  tools=None if project.read_only
                  else ToolSetup.for_folder(project.root, project.state))

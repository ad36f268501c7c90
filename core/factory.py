"""One way to assemble the core for a project, for the window and the command line alike."""

from __future__ import annotations

import weakref

from core.context.calibration import Calibration
from core.context.prompts import PromptComposer
from core.context.service import BuildCaches, ContextService
from core.engine import Engine, ToolSetup
from core.llm.adapter import LLMClient
from core.settings import SettingsStore
from core.store.project import Project


def calibration_for(settings: SettingsStore) -> Calibration:
    """Per-model calibration and provider-stated limits, beside the global settings."""
    return Calibration(settings.folder / "calibration.json")


_CACHES: weakref.WeakKeyDictionary[Project, BuildCaches] = weakref.WeakKeyDictionary()


def context_service(project: Project, calibration: Calibration | None = None,
                    ask_servers: bool = True) -> ContextService:
    """The context service for `project` (its prompt overrides, the shared calibration).
    `ask_servers=False` for the window's thread: it never waits on a server. The services of
    one open project share their build caches, so the window's meter and Inspector see the
    very compaction the engine's requests send."""
    caches = _CACHES.setdefault(project, BuildCaches())
    return ContextService(project.conversations, PromptComposer(project.state / "prompts"),
                          calibration, ask_servers=ask_servers, offer_tools=True,
                          caches=caches)


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

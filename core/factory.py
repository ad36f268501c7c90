"""One way to assemble the core for a project, for the window and the command line alike."""

from __future__ import annotations

from core.context.calibration import Calibration
from core.context.service import ProjectContext
from core.engine import Engine, ToolSetup
from core.llm.adapter import LLMClient
from core.settings import SettingsStore
from core.store.project import Project


def calibration_for(settings: SettingsStore) -> Calibration:
    """Per-model calibration and provider-stated limits, beside the global settings."""
    return Calibration(settings.folder / "calibration.json")


def build_engine(project: Project, context: ProjectContext | None = None,
                 client: LLMClient | None = None) -> Engine:
    """The turn engine for `project` over its one context (made here when not given): its
    tools (the project folder is where they work) and request copies saved in
    `.workbench/requests/`, unless the project is read-only."""
    context = context or ProjectContext.for_project(project)
    return Engine(context, client,
                  requests_dir=None if project.read_only else project.state / "requests",
                  tools=None if project.read_only
                  else ToolSetup.for_folder(project.root, project.state))

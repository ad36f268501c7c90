"""Agents: a name, instructions (the persona slot of the system prompt), the tools it may use
and optionally its own model. A project defines them in `.workbench/agents/<name>.json`:

    {"name": "Reviewer", "instructions": "You review code; you never change files.",
     "tools": ["read_file", "list_dir", "search_files"], "model": "gpt-4o"}

Without any file the default agent applies: the built-in persona and every tool of the mode.
A file that cannot be used is reported in one sentence and skipped; the others still load.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core import confined

DEFAULT_AGENT = "Default"
MAX_AGENT_FILE = 2**20  # an agent is a name, a persona and a list of tools


class Agent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=80)
    instructions: str = ""  # empty: the built-in persona
    tools: tuple[str, ...] | None = None  # None: every tool of the mode
    model: str | None = None
    description: str = ""

    @field_validator("tools")
    @classmethod
    def _known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        from core.tools import TOOL_NAMES
        if value is not None:
            unknown = sorted(set(value) - TOOL_NAMES)
            if unknown:
                raise ValueError(f"unknown tool(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(TOOL_NAMES))}")
        return value


DEFAULT = Agent(name=DEFAULT_AGENT, description="The built-in agent: every tool of the mode.")


def load_agents(state: Path, trusted: bool = True) -> tuple[list[Agent], list[str]]:
    """(agents, problems): the default agent first, then the project's, sorted by name. While
    the project is not trusted (core.trust), an agent's own model is not used: it would choose
    where the user's requests go."""
    agents: dict[str, Agent] = {}
    problems: list[str] = []
    folder = state / "agents"
    try:
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    except OSError as e:
        return [DEFAULT], [f"The agents folder cannot be read ({e.strerror or e})."]
    for path in files:
        try:
            agent = Agent.model_validate(json.loads(
                confined.read(path.name, MAX_AGENT_FILE, root=folder).decode("utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"Agent file {path.name} cannot be read: {e}.")
            continue
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "the file"
            problems.append(f"Agent file {path.name}: {where}: {err['msg']}.")
            continue
        if agent.model and not trusted:
            problems.append(f"Agent file {path.name}: its model {agent.model} is not used "
                            "until you trust the project.")
            agent = agent.model_copy(update={"model": None})
        if agent.name.casefold() == DEFAULT_AGENT.casefold() or agent.name in agents:
            problems.append(f"Agent file {path.name}: the name {agent.name!r} is taken.")
            continue
        agents[agent.name] = agent
    return [DEFAULT, *sorted(agents.values(), key=lambda a: a.name.casefold())], problems


def find_agent(agents: list[Agent], name: str | None) -> Agent:
    for agent in agents:
        if name is not None and agent.name.casefold() == name.casefold():
            return agent
    return DEFAULT

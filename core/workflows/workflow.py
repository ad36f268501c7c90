"""Workflows: an ordered list of steps the model works through in run mode.

A project keeps them in `.workbench/workflows/<name>.json`:

    {"name": "Release notes", "description": "Draft the notes for the next release",
     "steps": [{"id": "collect", "title": "Collect the changes",
                "brief": "List the merged changes since the last tag.",
                "done_when": "Every change is listed with its author.",
                "tools": ["run_shell", "read_file"]}]}

A step's `tools` (optional) narrows what its requests offer; complete_step is always offered.
`depends_on` (optional) names the earlier steps whose results the step's brief carries in
full (default: the step before it). A file that cannot be used is refused with the line or the
field that is wrong, never half-loaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core import confined
from core.confined import Refused
from core.store.fileio import atomic_write_json
from core.tool_names import BUILTIN_TOOL_NAMES, COMPLETE_STEP

WORKFLOWS_DIR = "workflows"
MAX_WORKFLOW_FILE = 2**20
STEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class WorkflowError(ValueError):
    """A workflow that cannot be used; the message says where and why, in one sentence."""


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, max_length=64)
    title: str = Field(min_length=1, max_length=200)
    brief: str = Field(min_length=1)
    done_when: str = ""
    tools: tuple[str, ...] | None = None  # None: every tool of run mode
    depends_on: tuple[str, ...] | None = None  # None: the step before it
    max_rounds: int | None = Field(default=None, ge=1, le=10_000)  # None: the settings' limit

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not STEP_ID.match(value):
            raise ValueError("a step id is letters, digits, '_', '-' or '.', starting with a "
                             f"letter or digit (got {value!r})")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            unknown = sorted(set(value) - BUILTIN_TOOL_NAMES - {COMPLETE_STEP})
            if unknown:
                raise ValueError(f"unknown tool(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(BUILTIN_TOOL_NAMES))}")
        return value


class Workflow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=120)
    description: str = ""
    steps: tuple[Step, ...]

    @model_validator(mode="after")
    def _check_steps(self) -> Workflow:
        if not self.steps:
            raise ValueError("a workflow needs at least one step")
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"two steps have the id {step.id!r}; each id must be unique")
            for dep in step.depends_on or ():
                if dep not in seen:
                    raise ValueError(f"step {step.id!r} depends on {dep!r}, which is not an "
                                     "earlier step")
            seen.add(step.id)
        return self

    def step(self, step_id: str) -> Step | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def depends_on(self, step_id: str) -> tuple[str, ...]:
        """The steps whose results `step_id`'s brief carries (the one before it by default)."""
        ids = [s.id for s in self.steps]
        at = ids.index(step_id)
        step = self.steps[at]
        if step.depends_on is not None:
            return step.depends_on
        return (ids[at - 1],) if at > 0 else ()


def parse_workflow(text: str, source: str = "the workflow") -> Workflow:
    """The workflow in `text` (JSON).

    Raises:
        WorkflowError: not JSON (with the line and column), or a field that is wrong (named
            with its path, e.g. `steps.2.brief`).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkflowError(f"{source} is not valid JSON: {e.msg} at line {e.lineno}, "
                            f"column {e.colno}") from None
    return validate_workflow(data, source)


def validate_workflow(data: object, source: str = "the workflow") -> Workflow:
    if not isinstance(data, dict):
        raise WorkflowError(f"{source} must be a JSON object with name, description and steps")
    try:
        return Workflow.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(p + 1) if isinstance(p, int) else str(p) for p in err["loc"]]
        where = ".".join(loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "is missing"
        elif err["type"] == "extra_forbidden":
            msg = "is not a workflow field (known: name, description, steps; a step: id, " \
                  "title, brief, done_when, tools, depends_on, max_rounds)"
        raise WorkflowError(f"{source}: {where + ' ' if where else ''}{msg}") from None


def load_workflow(path: Path, root: Path | None = None) -> Workflow:
    """The workflow in `path`: a file of the project's workflows folder `root`, or (None) one
    the user named; either way a regular file of at most MAX_WORKFLOW_FILE bytes."""
    try:
        text = confined.read(path, MAX_WORKFLOW_FILE, root=root, name=path.name).decode("utf-8")
    except UnicodeDecodeError:
        raise WorkflowError(f"{path.name} is not UTF-8 text") from None
    except Refused as e:
        raise WorkflowError(str(e)) from None
    return parse_workflow(text, path.name)


def file_name(name: str) -> str:
    """The file a workflow called `name` is kept in (a safe, readable slug)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-.").lower()
    return (slug or "workflow")[:80] + ".json"


class Workflows:
    """The project's workflows folder."""

    def __init__(self, state: Path) -> None:
        self.folder = state / WORKFLOWS_DIR

    def list(self) -> tuple[list[tuple[Path, Workflow]], list[str]]:
        """(usable workflows by name, one sentence per file that is not usable)."""
        found: list[tuple[Path, Workflow]] = []
        problems: list[str] = []
        try:
            files = sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []
        except OSError as e:
            return [], [f"The workflows folder cannot be read ({e.strerror or e})."]
        for path in files:
            try:
                found.append((path, load_workflow(path, self.folder)))
            except WorkflowError as e:
                problems.append(str(e))
        found.sort(key=lambda pw: pw[1].name.casefold())
        return found, problems

    def find(self, name_or_path: str) -> Workflow:
        """A workflow by name (case-insensitive), file name, or a path to a JSON file.

        Raises:
            WorkflowError: none matches (the message lists the project's), or it is unusable.
        """
        path = Path(name_or_path).expanduser()
        if path.suffix == ".json" and path.is_file():
            return load_workflow(path)
        own = self.folder / (name_or_path if name_or_path.endswith(".json")
                             else f"{name_or_path}.json")
        if own.is_file():
            return load_workflow(own, self.folder)
        found, _ = self.list()
        for _, wf in found:
            if wf.name.casefold() == name_or_path.casefold():
                return wf
        names = ", ".join(repr(wf.name) for _, wf in found) or "none yet"
        raise WorkflowError(f"there is no workflow {name_or_path!r} (the project has: {names}; "
                            "a path to a .json file works too)")

    def save(self, workflow: Workflow, replace: Path | None = None) -> Path:
        """Write `workflow` (atomically) under a file named after it; `replace`: the file it
        was loaded from, removed when the name changed. Returns its path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / file_name(workflow.name)
        atomic_write_json(path, workflow.model_dump(mode="json", exclude_defaults=True))
        if replace is not None and replace.resolve() != path.resolve():
            replace.unlink(missing_ok=True)
        return path

    def delete(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def unused_name(self, name: str) -> str:
        """`name`, or `name (2)`, `name (3)` ... whichever has no file yet."""
        candidate, n = name, 1
        while (self.folder / file_name(candidate)).exists():
            n += 1
            candidate = f"{name} ({n})"
        return candidate

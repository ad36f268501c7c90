"""The system prefix: composed per request from templates, never stored in the log.

Templates live in `resources/prompts/*.md`; a project may override any of them by a file of the
same name in `<project>/.workbench/prompts/`. The prefix depends only on the mode and, in run
mode, on the active step, so switching modes changes the next request and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core import confined
from core.model import Mode
from core.redact import redact
from core.workflows.state import RunContext

MAX_OVERRIDE = 2**20
TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "resources" / "prompts"


@dataclass(frozen=True)
class Section:
    name: str  # the template it came from
    text: str
    source: str  # "default" or "project"


class PromptComposer:
    """Reads templates (project overrides first) and composes the prefix for a mode."""

    def __init__(self, project_prompts: Path | None = None, defaults: Path = TEMPLATES_DIR):
        self.project_prompts = project_prompts
        self.defaults = defaults

    def template(self, name: str) -> tuple[str, str]:
        if self.project_prompts is not None:
            try:  # confined: the override goes into every request, like AGENTS.md
                data = confined.read(f"{name}.md", MAX_OVERRIDE, root=self.project_prompts)
                return data.decode("utf-8").strip(), "project"
            except (OSError, UnicodeDecodeError):  # none, or not a text file of the folder
                pass
        return (self.defaults / f"{name}.md").read_text(encoding="utf-8").strip(), "default"

    def sections(self, mode: Mode, run: RunContext | None = None,
                 persona: str | None = None, instructions: str | None = None
                 ) -> list[Section]:
        """`persona`: the chosen agent's instructions, in place of the built-in persona;
        `instructions`: the project's (core.context.instructions), right after our rules and
        before the mode's part, so every mode's prefix starts with the same bytes."""
        names: list[tuple[str, dict[str, object]]] = []
        if mode == "chat":
            names = [("base_chat", {})]
        elif mode == "agent":
            names = [("base_chat", {}), ("agent_persona", {}), ("tool_policy", {})]
        else:
            names = [("base_run", {}), ("agent_persona", {}), ("tool_policy", {})]
            if run is None:
                names.append(("run_directive_idle", {}))
            elif run.complete:  # the post-run profile: no step rules, no step, no brief
                names = [("base_chat", {}), ("agent_persona", {}), ("tool_policy", {}),
                         ("post_run", {"workflow_title": run.workflow_title, "goal": run.goal})]
            else:
                fields = {
                    "workflow_title": run.workflow_title, "goal": run.goal,
                    "step_number": run.step_number, "step_count": run.step_count,
                    "step_id": run.step_id, "step_title": run.step_title, "brief": run.brief,
                    "done_when": run.done_when or "(not stated)", "steps": run.steps,
                    "step_context": run.step_context,
                }
                names += [("run_directive", fields), ("node_brief", fields)]
        names.append(("mode_banner", {"mode": mode}))
        out = []
        for name, fields in names:
            if name == "agent_persona" and persona:
                out.append(Section(name, persona.strip(), "agent"))
                continue
            text, source = self.template(name)
            out.append(Section(name, _fill(text, fields), source))
        if instructions:
            out.insert(1, Section("project_instructions", instructions, "project"))
        # no key in what is sent: an agent's instructions, a run's goal, a project's prompt
        return [Section(x.name, clean, x.source) if (clean := redact(x.text)) != x.text else x
                for x in out]

    def compose(self, mode: Mode, run: RunContext | None = None,
                persona: str | None = None, instructions: str | None = None) -> str:
        return "\n\n".join(s.text for s in self.sections(mode, run, persona, instructions))


def _fill(text: str, fields: dict[str, object]) -> str:
    for key, value in fields.items():
        text = text.replace("{" + key + "}", str(value))
    return text

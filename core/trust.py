"""Project trust: what a project folder ships that acts on the user's behalf stays inert until
the user trusts exactly that content.

A project is a folder, and folders arrive by `git clone`. Some of what `.workbench/` may hold
acts with the user's rights or chooses where the user's key and code go:

- the MCP servers of `.workbench/mcp.json` (a command run with the user's rights, a URL called
  with the entry's headers);
- the provider routing of `.workbench/project.json` (`model`, `api_base`, `summary_model`);
- an agent of `.workbench/agents/` that names its own model.

None of it is used until the user trusts the project. Trust is recorded outside the project,
in the user's config folder (`trusted-projects.json`), keyed by the folder and a hash of exactly
those settings: a later `git pull` that changes any of them asks again. A project that ships
none of them needs no decision. Approval relaxations (`autoApproveReadOnly`, allowances, the
network switch) are never taken from a project's files at all: see `core.mcp` and
`core.approval_seal`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import confined
from core.confined import Refused
from core.store.fileio import atomic_write_json, read_json

TRUST_FILE = "trusted-projects.json"
ROUTING_KEYS = ("model", "api_base", "summary_model")  # project.json settings that route
MAX_FILE = 1 << 20  # a settings file larger than this is not read (nothing in it is used)


@dataclass(frozen=True)
class Verdict:
    """What a project ships that acts for the user, and whether the user trusts it.

    Attributes:
        items: one sentence each, in full (commands with their arguments, addresses).
        routing: the project chooses where requests go (project.json or an agent's model).
        servers: the names of the project's MCP servers.
        digest: the hash the decision is kept under.
        trusted: the user trusted exactly this content (or there is nothing to trust).
    """

    items: tuple[str, ...] = ()
    routing: bool = False
    servers: tuple[str, ...] = ()
    digest: str = ""
    trusted: bool = True
    declined: bool = False  # the user said no to exactly this content (not asked again)
    subject: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def restricted(self) -> bool:
        """Something is shipped and the user has not trusted it: it is not used."""
        return bool(self.items) and not self.trusted

    def report(self, project: Path) -> str:
        """The list the window and `workbench trust` show, one line each."""
        lines = [f"{project} ships settings that act on your behalf:"]
        lines += [f"  - {item}" for item in self.items]
        return "\n".join(lines)


def read_small_json(root: Path, path: Path) -> tuple[Any, str | None]:
    """The JSON of a small regular file of the project at `root`, read by the one confined
    reader; (None, None) when there is none, (None, a sentence) when it cannot be used."""
    try:
        data = confined.read(path, MAX_FILE, root=root, name=path.name)
    except Refused as e:
        return None, None if e.missing else str(e)
    try:
        return json.loads(data.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"{path.name} is not valid JSON ({e})"


def _mcp_entries(state: Path) -> dict[str, Any]:
    data, _problem = read_small_json(state.parent, state / "mcp.json")
    entries = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {str(k): v for k, v in sorted(entries.items()) if isinstance(v, dict)}


def _server_sentence(name: str, entry: Mapping[str, Any]) -> str:
    if entry.get("url"):
        said = f"MCP server {name!r} connects to {entry.get('url')}"
        headers = entry.get("headers")
        if isinstance(headers, dict) and headers:
            said += f", sending the headers {', '.join(sorted(map(str, headers)))}"
        return said
    argv = [str(entry.get("command") or "")]
    args = entry.get("args")
    if isinstance(args, list):
        argv += [str(a) for a in args]
    said = f"MCP server {name!r} runs, with your rights: {_shell_words(argv)}"
    env = entry.get("env")
    if isinstance(env, dict) and env:
        said += f" (setting {', '.join(sorted(map(str, env)))})"
    if entry.get("cwd"):
        said += f" in {entry.get('cwd')}"
    return said


def _shell_words(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def _agent_models(state: Path) -> dict[str, str]:
    folder = state / "agents"
    try:
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    except OSError:
        return {}
    models = {}
    for path in files:
        data, _problem = read_small_json(state.parent, path)
        if isinstance(data, dict) and isinstance(data.get("model"), str) and data["model"]:
            models[path.name] = data["model"]
    return models


def shipped(info: Mapping[str, Any], state: Path) -> tuple[dict[str, Any], list[str]]:
    """What the project at `state` ships that acts for the user: the exact values (what is
    hashed) and one sentence each. `info`: its project.json."""
    settings = info.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    routing = {k: settings[k] for k in ROUTING_KEYS if settings.get(k) not in (None, "")}
    servers = _mcp_entries(state)
    agents = _agent_models(state)
    items = []
    if "api_base" in routing:
        items.append(f"project.json sends every request, with your API key, to "
                     f"{routing['api_base']}")
    if "model" in routing:
        items.append(f"project.json chooses the model {routing['model']}")
    if "summary_model" in routing:
        items.append(f"project.json chooses the summary model {routing['summary_model']}")
    items += [_server_sentence(name, entry) for name, entry in servers.items()]
    items += [f"the agent file {name} chooses the model {model}"
              for name, model in agents.items()]
    subject = {"settings": routing, "mcpServers": servers, "agents": agents}
    return subject, items


def _digest(subject: Mapping[str, Any]) -> str:
    text = json.dumps(subject, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _key(root: Path) -> str:
    return str(Path(os.path.realpath(root)))


class TrustStore:
    """The user's decisions, in their config folder (never in a project)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / TRUST_FILE

    @classmethod
    def default(cls) -> TrustStore:
        from core.settings import config_dir

        return cls(config_dir())

    def _read(self) -> dict[str, Any]:
        try:
            value = read_json(self.path)
        except (OSError, ValueError):
            return {}
        projects = value.get("projects") if isinstance(value, dict) else None
        return projects if isinstance(projects, dict) else {}

    def verdict(self, root: Path, info: Mapping[str, Any], state: Path) -> Verdict:
        """The project's shipped settings and the user's decision on exactly them."""
        subject, items = shipped(info, state)
        digest = _digest(subject)
        if not items:
            return Verdict(digest=digest, subject=subject)
        kept = self._read().get(_key(root))
        kept = kept if isinstance(kept, dict) else {}
        return Verdict(tuple(items), bool(subject["settings"] or subject["agents"]),
                       tuple(subject["mcpServers"]), digest, kept.get("digest") == digest,
                       kept.get("declined") == digest, subject)

    def trust(self, root: Path, verdict: Verdict) -> Verdict:
        """Record that the user trusts `verdict`'s content of the project at `root`."""
        self._keep(root, {"digest": verdict.digest,
                          "at": datetime.now(UTC).isoformat(timespec="seconds")})
        return replace(verdict, trusted=True, declined=False)

    def decline(self, root: Path, verdict: Verdict) -> Verdict:
        """Record that the user keeps the project restricted with `verdict`'s content: the
        window does not ask again until that content changes."""
        projects = self._read()
        kept = projects.get(_key(root))
        self._keep(root, {**(kept if isinstance(kept, dict) else {}),
                          "declined": verdict.digest})
        return replace(verdict, declined=True)

    def _keep(self, root: Path, entry: dict[str, Any]) -> None:
        projects = self._read()
        projects[_key(root)] = entry
        atomic_write_json(self.path, {"projects": projects})

    def forget(self, root: Path) -> bool:
        """Take back the trust given to the project at `root`; whether there was any."""
        projects = self._read()
        if projects.pop(_key(root), None) is None:
            return False
        atomic_write_json(self.path, {"projects": projects})
        return True


def untrusted_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A restricted project's settings: its routing left out."""
    return {k: v for k, v in overrides.items() if k not in ROUTING_KEYS}

"""A project: a folder the user chooses, with its state in `<folder>/.workbench/`."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.approval_seal import ApprovalSeal
from core.stand_ins import remove_stand_ins
from core.store.conversations import ConversationStore
from core.store.errors import ProjectPathError, ReadOnlyError
from core.store.fileio import atomic_write_json, read_json
from core.store.lock import ProjectLock
from core.store.migrations import MIGRATIONS, Migration, current_version, migrate
from core.store.state_links import remove_links
from core.trust import TrustStore, Verdict, untrusted_overrides

STATE_DIR = ".workbench"


class Project:
    """An open project.

    Attributes:
        root: the project folder.
        state: its `.workbench` folder.
        info: the content of `project.json` (name, schema_version, settings overrides).
        read_only_reason: None when this process may write; otherwise a sentence saying why not.
        conversations: the conversation store.
        migrations_applied: names of the migrations run while opening.
        trust: what the folder ships that acts for the user, and whether the user trusts it
            (core.trust); while it is restricted, none of it is used.
    """

    def __init__(
        self,
        root: Path,
        info: dict[str, Any],
        lock: ProjectLock | None,
        read_only_reason: str | None,
        migrations_applied: list[str],
        trust: TrustStore | None = None,
    ) -> None:
        self.root = root
        self.state = root / STATE_DIR
        self.info = info
        self._lock = lock
        self.read_only_reason = read_only_reason
        self.migrations_applied = migrations_applied
        self.conversations = ConversationStore(
            self.state / "conversations", self.state / "trash", read_only_reason,
            lock.lost if lock is not None else None)
        self.links_removed: list[str] = []  # links found in .workbench/ as it opened (removed)
        self.trust_store = trust or TrustStore.default()
        self.trust = self.trust_store.verdict(root, info, self.state)
        seal: list[ApprovalSeal] = []  # made on first use, in the user's config folder

        def network_seal(conv_id: str) -> str:
            if not seal:
                seal.append(ApprovalSeal.in_folder(self.trust_store.path.parent))
            return seal[0].network(conv_id)

        self.conversations.network_seal = network_seal

    @property
    def name(self) -> str:
        return str(self.info.get("name") or self.root.name)

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    @property
    def overrides(self) -> dict[str, Any]:
        """The project's settings; while it is not trusted, without those that choose where
        requests go."""
        value = self.info.get("settings", {})
        value = value if isinstance(value, dict) else {}
        return untrusted_overrides(value) if self.trust.restricted else value

    @property
    def trusted(self) -> bool:
        """What the folder ships that acts for the user may be used."""
        return not self.trust.restricted

    def trusted_servers(self) -> dict[str, Any] | None:
        """The project's MCP entries exactly as the user trusted them (None: not trusted): a
        server whose entry changes while the project is open is not started again."""
        if self.trust.restricted:
            return None
        return dict(self.trust.subject.get("mcpServers") or {})

    def review_trust(self) -> Verdict:
        """What the folder ships now (read again: it may have changed since it was opened),
        and the user's decision on exactly that."""
        self.trust = self.trust_store.verdict(self.root, self.info, self.state)
        return self.trust

    def trust_now(self) -> Verdict:
        """The user trusts what the folder ships, exactly as it was shown to them (the verdict
        made when the project opened); kept in their config folder."""
        if self.trust.restricted:
            self.trust = self.trust_store.trust(self.root, self.trust)
        return self.trust

    def update_info(self, **changes: Any) -> None:
        if self.read_only_reason is not None:
            raise ReadOnlyError(self.read_only_reason)
        self.info = {**self.info, **changes}
        atomic_write_json(self.state / "project.json", self.info)
        self.trust = self.trust_store.verdict(self.root, self.info, self.state)

    def ui_state(self) -> dict[str, Any]:
        """What the window needs to reopen the project as it was left (open conversation,
        drafts). Kept apart from project.json, which holds settings."""
        try:
            value = read_json(self.state / "ui-state.json")
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def save_ui_state(self, state: dict[str, Any]) -> None:
        if self.read_only_reason is None:
            # Replaced atomically (an app that crashes leaves the old or the new state) but not
            # fsync'ed: this is the window's thread, a second after each Send (the draft is
            # cleared), and an fsync there waits behind the turn's request copy being flushed,
            # the answer frozen meanwhile. Only a power loss can lose a draft.
            atomic_write_json(self.state / "ui-state.json", state, durable=False)

    def close(self) -> None:
        self.conversations.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        create: bool = True,
        read_only: bool = False,
        migrations: Sequence[Migration] = MIGRATIONS,
        trust: TrustStore | None = None,
    ) -> Project:
        """Open (and by default create) the project at `path`.

        Never fails because another process has the project, or because a newer version wrote
        it: those open read-only with the reason in `read_only_reason`.

        Raises:
            ProjectPathError: the path is a file, does not exist (with create=False), or cannot
                be written to create the project.
        """
        root = Path(path).expanduser().absolute()
        state = _state_folder(root, create)
        reason: str | None = "opened read-only on request" if read_only else None
        version = current_version(migrations)
        info, info_problem = _read_info(state / "project.json", root)
        found, problem = _schema(state, info, info_problem, version)
        reason = reason or problem
        lock: ProjectLock | None = None
        if reason is None:
            lock, reason = _lock(state)

        applied: list[str] = []
        if reason is None and found < version:
            info, applied = migrate(state, info, migrations)
            atomic_write_json(state / "project.json", info)
        for sub in ("conversations", "tool-results", "requests"):
            if reason is None:
                (state / sub).mkdir(exist_ok=True)
        links: list[str] = []
        if reason is None:  # ours alone: no command of another window is running in it
            remove_stand_ins(root)
            links = remove_links(state)
        project = cls(root, info, lock, reason, applied, trust)
        project.links_removed = links
        project.conversations.remove_unfinished_imports()
        return project


def _state_folder(root: Path, create: bool) -> Path:
    """The project's state folder, made when it has none and `create` says so."""
    if root.exists() and not root.is_dir():
        raise ProjectPathError(
            f"{root} is a file, not a folder; choose a folder for the project")
    state = root / STATE_DIR
    if state.is_symlink():  # its reads and writes would all land where it points
        raise ProjectPathError(
            f"{state} is a symbolic link (to {os.readlink(state)}); a project's {STATE_DIR}/ "
            "must be its own folder. Remove the link, or open the folder it leads to.")
    if not state.is_dir():
        if not create:
            raise ProjectPathError(
                f"{root} is not a Context Workbench project (no {STATE_DIR}/)")
        _create(root)
    return state


def _schema(state: Path, info: dict[str, Any], info_problem: str | None, version: int
            ) -> tuple[int, str | None]:
    """The schema version the project was saved with, and why it must open read-only (a
    file that cannot be read as it should, a newer schema), if it must."""
    found = version
    if not info_problem:
        raw_version = info.get("schema_version", 1)
        if isinstance(raw_version, int) and not isinstance(raw_version, bool):
            found = raw_version
        else:
            info_problem = (
                f"{state / 'project.json'} has a schema_version that is not a whole number "
                f"({raw_version!r}). The project is open read-only so nothing is overwritten; "
                "fix that file to edit.")
    for sub in ("conversations", "tool-results", "requests"):
        if (state / sub).exists() and not (state / sub).is_dir():
            info_problem = info_problem or (
                f"{state / sub} is a file where a folder should be. The project is open "
                "read-only; move that file away to edit.")
    if info_problem:
        return found, info_problem
    if found > version:
        return found, (
            f"This project was saved by a newer Context Workbench (schema {found}; this "
            f"version understands up to {version}). It is open read-only so nothing is "
            "lost; update the app to edit it.")
    return found, None


def _lock(state: Path) -> tuple[ProjectLock | None, str | None]:
    """The project's lock, or why it could not be taken (the project then opens read-only)."""
    lock = ProjectLock(state)
    try:
        taken = lock.acquire()
    except OSError as e:
        return None, f"The project folder cannot be written ({e.strerror}); it is open read-only."
    if not taken:
        holder = f" ({lock.holder})" if lock.holder else ""
        return None, (
            f"Another Context Workbench{holder} has this project open. This view is "
            "read-only; close the other one to edit here.")
    return lock, None


def _create(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        state = root / STATE_DIR
        state.mkdir(exist_ok=True)
        for sub in ("conversations", "tool-results", "requests"):
            (state / sub).mkdir(exist_ok=True)
        atomic_write_json(
            state / "project.json",
            {"schema_version": current_version(), "name": root.name, "settings": {}},
        )
    except OSError as e:
        what = {
            errno.EACCES: "permission denied",
            errno.EPERM: "not permitted",
            errno.EROFS: "the disk is read-only",
            errno.ENOTDIR: "part of the path is a file",
            errno.ENOSPC: "the disk is full",
        }.get(e.errno or 0, e.strerror or str(e))
        raise ProjectPathError(f"Cannot create a project in {root}: {what}") from e


def _read_info(path: Path, root: Path) -> tuple[dict[str, Any], str | None]:
    try:
        info = read_json(path)
    except FileNotFoundError:
        return {"schema_version": 1, "name": root.name, "settings": {}}, None
    except (OSError, ValueError) as e:
        return {"name": root.name}, (
            f"{path} cannot be read ({type(e).__name__}: {e}). The project is open read-only so "
            "nothing is overwritten; fix or remove that file to edit."
        )
    if not isinstance(info, dict):
        return {"name": root.name}, f"{path} is not a JSON object; the project is open read-only."
    return info, None

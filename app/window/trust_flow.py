"""Project trust in the window (core.trust): a project that ships settings acting for the user
opens restricted, asks once what to do with exactly those settings, and says it is restricted
for as long as it is open (File → Trust this project… asks again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox

from app.window.notices import Notices
from core.store.project import Project

TRUST = "Trust and use them"
KEEP = "Keep restricted"


class TrustWindow(Protocol):
    """What the flow needs of the window (ui.main_window.MainWindow)."""

    def set_restricted(self, text: str | None) -> None: ...
    def ask(self, text: str, detail: str, choices: tuple[str, ...],
            on_answer: Callable[[str], None], safe_default: bool = False) -> QMessageBox: ...


class TrustFlow(QObject):
    """Asks about the open project's shipped settings; `reopen` opens the project again once
    it is trusted (its MCP servers and provider settings are read when it opens)."""

    def __init__(self, window: TrustWindow, notices: Notices,
                 reopen: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.notices = notices
        self._reopen = reopen
        self._project: Project | None = None
        self._box: QMessageBox | None = None

    def project_opened(self, project: Project) -> None:
        """Say whether the project is restricted; ask, unless the user already kept exactly
        these settings restricted."""
        self._withdraw()
        self._project = project
        verdict = project.trust
        if not verdict.restricted:
            self.window.set_restricted(None)
            return
        unused = []
        if verdict.servers:
            n = len(verdict.servers)
            unused.append(f"its {n} MCP server{'s' if n != 1 else ''} do not start")
        if verdict.routing:
            unused.append("requests go to your own provider settings, not the ones it names")
        self.window.set_restricted("Restricted: this project ships settings that act on your "
                                   "behalf, and you have not trusted them: "
                                   + "; ".join(unused) + ".")
        if not verdict.declined:
            self.review()

    def review(self) -> None:
        """The question: exactly what would run and where requests would go."""
        project = self._project
        if project is None or not project.review_trust().restricted:
            return
        self._withdraw()
        detail = (project.trust.report(project.root) + "\n\nUntil you trust them, none of "
                  "these is used. Trust them only if you know where this folder comes from. "
                  "A change to any of them (a git pull, an edit) asks again.")
        self._box = self.window.ask("Do you trust the settings this project ships?", detail,
                                    (TRUST, KEEP), self._on_answer, safe_default=True)

    def _on_answer(self, choice: str) -> None:
        self._box = None
        project = self._project
        if project is None:
            return
        with self.notices.saving("Your decision about this project was not kept"):
            if choice == TRUST:
                project.trust_now()
            else:
                project.trust = project.trust_store.decline(project.root, project.trust)
        if choice == TRUST and project.trusted:
            self._reopen()

    def _withdraw(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None

"""Start the window: QApplication on a qasync loop, litellm importing in the background."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from core.llm import runtime
from core.settings import SettingsStore, data_dir

DEFAULT_PROJECT_NAME = "Default project"


def choose_project(arg: str | None, store: SettingsStore) -> Path:
    """The project to open: the argument, else the last one used, else the default project."""
    if arg:
        return Path(arg).expanduser()
    for recent in store.load().recent_projects:
        if Path(recent, ".workbench").is_dir():
            return Path(recent)
    return data_dir() / DEFAULT_PROJECT_NAME


def run_gui(project_dir: str | None) -> int:
    # Warm the slow import while Qt starts and the window is built and shown.
    runtime.start_background_import()

    import qasync
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.controller import Controller
    from ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Context Workbench")
    app.setOrganizationName("context-workbench")
    icon = Path(__file__).resolve().parents[1] / "resources" / "icons" / "workbench.svg"
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    store = SettingsStore()
    window = MainWindow()
    controller = Controller(window, store)
    window.show()
    if not controller.open_project(choose_project(project_dir, store)):
        # The chosen folder cannot hold a project: fall back to the default one.
        if not controller.open_project(data_dir() / DEFAULT_PROJECT_NAME):
            return 1
    if os.environ.get("WORKBENCH_EXIT_AFTER_SHOW"):  # start-up benchmark: show, then leave
        from PySide6.QtCore import QTimer

        QTimer.singleShot(0, window.close)

    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    app.lastWindowClosed.connect(closed.set)
    with loop:
        loop.run_until_complete(closed.wait())
    return 0

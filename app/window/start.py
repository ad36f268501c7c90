"""Start the window: QApplication on a qasync loop, the model's transport warmed in the background
(litellm, or the openai SDK for a model that speaks the OpenAI protocol)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app import start_up
from app.window import process
from core.settings import SettingsStore, data_dir

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from app.window.controller import Controller

DEFAULT_PROJECT_NAME = "Default project"


def choose_project(arg: str | None, store: SettingsStore) -> Path:
    """The project to open: the argument, else the last one used, else the default project."""
    if arg:
        return Path(arg).expanduser()
    for recent in store.load().recent_projects:
        if Path(recent, ".workbench").is_dir():
            return Path(recent)
    return data_dir() / DEFAULT_PROJECT_NAME


# What Qt's xcb platform plugin needs beyond a plain X server (Debian/Ubuntu package names).
XCB_LIBRARIES = {
    "xcb-cursor": "libxcb-cursor0", "xcb-icccm": "libxcb-icccm4",
    "xcb-keysyms": "libxcb-keysyms1", "xkbcommon-x11": "libxkbcommon-x11-0",
}


def missing_display_libraries() -> str | None:
    """On X11, Qt aborts without a word of advice if these are missing; say what to install."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return None
    if not os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    import ctypes.util

    missing = [pkg for lib, pkg in XCB_LIBRARIES.items() if ctypes.util.find_library(lib) is None]
    if not missing:
        return None
    return ("the window needs system libraries that are not installed: "
            f"{' '.join(missing)}. Install them with: sudo apt-get install {' '.join(missing)} "
            "(or run `make run`, which does it when it can).")


def run_gui(project_dir: str | None) -> int:
    process.prepare_runtime()
    start_up.without_collector()

    problem = missing_display_libraries()
    if problem:
        print(f"workbench: {problem}", file=sys.stderr)
        return 1

    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.window import boundary
    from app.window.controller import Controller
    from app.window.notices import Notices
    from ui.main_window import MainWindow

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Context Workbench")
    app.setOrganizationName("context-workbench")
    icon = Path(__file__).resolve().parents[1] / "resources" / "icons" / "workbench.svg"
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    # The boundary is up before anything else can fail; what it says waits for the window.
    notices = Notices()
    boundary.install(notices)
    loop.set_exception_handler(boundary.loop_handler(notices))
    store = SettingsStore()
    window = MainWindow()
    controller = Controller(window, store, notices=notices)
    window.show()
    if not controller.open_project(choose_project(project_dir, store)):
        # The chosen folder cannot hold a project: fall back to the default one.
        if not controller.open_project(data_dir() / DEFAULT_PROJECT_NAME):
            return 1
    # The window is built and its project open: the warm-up starts now, not after the loop's
    # first pass (which paints, counts and opens what the first start asks for before it).
    process.warm_up_library(controller.model_in_use())
    if os.environ.get("WORKBENCH_EXIT_AFTER_SHOW"):  # benchmarks: show (and visit), then leave
        QTimer.singleShot(0, lambda: _bench_and_leave(
            controller, window, os.environ["WORKBENCH_EXIT_AFTER_SHOW"] == "visit-all"))

    # SIGTERM (logout, `kill`): close as if the user did, so a running answer is persisted and
    # state saved. Python only runs signal handlers when it gets control, hence the idle timer.
    signal.signal(signal.SIGTERM, lambda *_: QTimer.singleShot(0, window.close))
    wake = QTimer()
    wake.start(250)
    wake.timeout.connect(lambda: None)

    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    app.lastWindowClosed.connect(closed.set)
    with loop:
        loop.run_until_complete(closed.wait())
    return 0


def _bench_and_leave(controller: Controller, window: QWidget, visit_all: bool) -> None:
    """`make bench`: say when the window was shown and the process's size; with `visit_all`,
    also its size after showing every conversation of the project in turn, and after closing
    the project (an empty one in a fresh folder takes its place). Then close the window."""
    def rss(label: str) -> None:
        status = Path("/proc/self/status")
        if status.exists():
            kb = next((ln.split()[1] for ln in status.read_text().splitlines()
                       if ln.startswith("VmRSS:")), "0")
            print(f"{label} {kb}", file=sys.stderr, flush=True)

    from PySide6.QtWidgets import QApplication

    print(f"window-shown {time.time():.6f}", file=sys.stderr, flush=True)
    rss("rss-kb")
    def settled() -> None:  # the meter's count of what is shown is done, as a user would see
        deadline = time.monotonic() + 120
        while controller.meter.counting and time.monotonic() < deadline:
            QApplication.processEvents()
            time.sleep(0.01)

    if visit_all and controller.project is not None:
        root = controller.project.root
        for summary in controller.project.conversations.list():
            controller.show_conversation(summary.id)
            QApplication.processEvents()
        settled()
        rss("rss-kb-visited")
        controller.open_project(root / ".bench-empty")
        settled()
        rss("rss-kb-closed")
    window.close()

"""The Context Inspector on a 10,000-message conversation: opening the panel, a refresh after
an append (the meter's rebuild plus the panel), switching the model view on."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from tests.bench.common import (
    big_messages,
    headless_window_env,
    median,
    project_with,
    report,
)


def run() -> None:
    print("inspector")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        headless_window_env(tmp / "cfg")
        os.environ["WORKBENCH_MODEL"] = "gpt-4o"
        os.environ["WORKBENCH_CONTEXT_WINDOW"] = "128000"
        from PySide6.QtWidgets import QApplication

        from app.window.controller import Controller
        from app.window.process import prepare_runtime
        from core.llm.runtime import load_litellm
        from core.settings import SettingsStore
        from ui.main_window import MainWindow

        app = QApplication.instance() or QApplication([])
        prepare_runtime()
        load_litellm()
        conv = project_with(tmp / "big", big_messages())
        window = MainWindow()
        window.resize(1400, 900)
        controller = Controller(window, SettingsStore(tmp / "cfg"),
                                open_settings_on_first_run=False)
        window.show()
        controller.open_project(tmp / "big")
        controller.show_conversation(conv)
        deadline = time.monotonic() + 60
        from PySide6.QtCore import QEventLoop, QTimer

        def rest(ms: int) -> None:
            """The window waiting in its event loop, as it does between events (a loop that
            spins processEvents never looks idle to the work waiting for it: core.give_way)."""
            waiting = QEventLoop()
            QTimer.singleShot(ms, waiting.quit)
            waiting.exec()

        while controller.meter.report is None and time.monotonic() < deadline:
            rest(10)  # the first build of a long log runs aside
        from core.llm.tokens import TokenCounter
        from core.model import ConversationMessage

        counter = TokenCounter("o200k_base")
        store = controller.project.conversations if controller.project else None
        assert store is not None
        opens: list[float] = []
        reopens: list[float] = []

        def settle(start: object) -> None:
            """Run `start` and the window until the meter shows the build it asked for (a
            long log is built on the meter's thread)."""
            before = controller.meter.report
            start()  # type: ignore[operator]
            deadline = time.monotonic() + 30
            while (controller.meter.report is before or controller.meter.report is None) \
                    and time.monotonic() < deadline:
                rest(1)
            app.processEvents()

        for i in range(5):
            # a new request to show each time (the panel keeps its rows for the same one)
            store.append(conv, counter.with_count(ConversationMessage(role="user",
                                                                      content=f"ask {i}")))
            settle(controller.refresh_usage)
            for times in (opens, reopens):
                t = time.perf_counter()
                window.inspector_action.trigger()
                app.processEvents()
                times.append((time.perf_counter() - t) * 1000)
                assert window.inspector.rows()
                window.inspector_action.trigger()
                app.processEvents()
        report("open the panel on a 10,000-message conversation (median of 5)", median(opens),
               "ms", "< 100 ms")
        report("  open it again on the same request", median(reopens), "ms")
        window.inspector_action.trigger()
        steps = []
        for i in range(5):
            store.append(conv, counter.with_count(ConversationMessage(role="user",
                                                                      content=f"more {i}")))
            t = time.perf_counter()
            settle(controller.refresh_usage)
            steps.append((time.perf_counter() - t) * 1000)
        report("  after an append: rebuild (on the meter's thread), meter and panel "
               "(median of 5)", median(steps), "ms", "< 100 ms")
        slider = []
        for percent in (90, 70, 50, 30, 150):
            window.inspector.slider.setValue(percent)
            controller.inspector.refresh_after_slider.cancel()  # its one refresh is measured here
            t = time.perf_counter()
            controller.inspector.refresh()  # what the slider's debounce timer runs
            app.processEvents()
            slider.append((time.perf_counter() - t) * 1000)
        window.inspector.slider.setValue(100)
        report("  a budget slider step: rebuild at that budget and show it (median of 5)",
               median(slider), "ms", "< 100 ms")
        keys, counts, previews = [], [], []
        for i in range(20):
            t = time.perf_counter()
            window.composer.set_text("Please check the parser once more " * 3 + "x" * i)
            app.processEvents()
            keys.append((time.perf_counter() - t) * 1000)
            if i % 4 == 3:  # typing rests: the debounced count and bar, then the decisions
                t = time.perf_counter()
                controller.meter.show()
                counts.append((time.perf_counter() - t) * 1000)
                controller.inspector.refresh_after_draft.cancel()
                t = time.perf_counter()
                controller.inspector.refresh()
                app.processEvents()
                previews.append((time.perf_counter() - t) * 1000)
                assert "With your draft" in window.inspector.header.text()
        window.composer.set_text("")
        report("  a keystroke in the composer, panel open (median of 20)", median(keys), "ms",
               "< 5 ms")
        report("  typing rests: the draft counted, meter and bar (median of 5)", median(counts),
               "ms")
        report("  ... then the decisions with the draft (median of 5)", median(previews), "ms")
        t = time.perf_counter()
        window.inspector.model_view.setChecked(True)
        window.transcript.viewport().repaint()
        report("  model view on, transcript repainted", (time.perf_counter() - t) * 1000, "ms")
        window.close()

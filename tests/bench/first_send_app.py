"""The window as `workbench` starts it, with a user who sends a message `at` seconds after launch
(run by bench_first_send in a process of its own). Prints when the window was shown, when the
model library was ready and when the message was sent, then closes once the answer is in."""

from __future__ import annotations

import sys
import time


def main(project: str, launched: float, at: float) -> int:
    from PySide6.QtCore import QTimer

    from app.window import controller as controller_module
    from app.window.start import run_gui
    from core.llm import runtime

    made: list[controller_module.Controller] = []
    init = controller_module.Controller.__init__

    def capture(self: controller_module.Controller, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)
        QTimer.singleShot(max(0, int((launched + at - time.time()) * 1000)), send)
        QTimer.singleShot(0, watch)

    def say(what: str) -> None:
        print(f"{what} {time.time():.6f}", file=sys.stderr, flush=True)

    def send() -> None:
        say("sent")
        made[0].send("hello")
        QTimer.singleShot(50, until_done)

    def until_done() -> None:
        controller = made[0]
        if controller.busy():
            QTimer.singleShot(50, until_done)
            return
        say("done")
        controller.window.close()

    def watch() -> None:
        if runtime.ready_for(made[0].model_in_use() or ""):
            say("library-ready")
        else:
            QTimer.singleShot(20, watch)

    controller_module.Controller.__init__ = capture  # type: ignore[method-assign]
    return run_gui(project)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3])))

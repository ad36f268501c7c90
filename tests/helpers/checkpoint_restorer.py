"""A restore that stops half-way: `python -m tests.helpers.checkpoint_restorer ROOT CONV ENTRY
N MARKER` undoes the turn of ENTRY and, after N files, writes MARKER and waits to be killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from core.checkpoints.restore import plan_undo, restore
from core.checkpoints.store import Store


def main() -> None:
    root, conv, entry, n, marker = Path(sys.argv[1]), sys.argv[2], sys.argv[3], \
        int(sys.argv[4]), Path(sys.argv[5])
    store = Store(root, root / ".workbench")

    def progress(done: int) -> None:
        if done == n:
            marker.write_text("half-way")
            time.sleep(600)  # the test kills this process here

    restore(store, conv, plan_undo(store.events(conv), entry), progress=progress)


if __name__ == "__main__":
    main()

"""Checkpoints: the snapshot an agent round takes, on a 10,000-file project, and what a turn
adds to the checkpoint store on disk."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from core.checkpoints.store import Store
from core.checkpoints.views import turns, undo
from tests.bench.common import median, report

FILES = 10_000


def _disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run() -> None:
    print("checkpoints")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        for i in range(FILES):
            folder = root / f"pkg{i // 100:03}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"mod{i % 100:02}.py").write_text(
                f'"""Module {i}."""\n\n' + "".join(f"def f{j}(x):\n    return x + {i * j}\n\n"
                                                  for j in range(20)))
        (root / ".workbench").mkdir()
        store = Store(root, root / ".workbench")
        shadow = root / ".workbench" / "checkpoints.git"
        t = time.perf_counter()
        store.snapshot("bench", {"phase": "before", "turn": "t0", "entry": "e0"})
        report(f"first snapshot of {FILES:,} files ({_disk(root) / 2**20:.0f} MB)",
               (time.perf_counter() - t) * 1000, "ms")
        first_size = _disk(shadow)
        times, growth = [], []
        for turn in range(1, 21):  # a turn edits three files and adds one
            size = _disk(shadow)
            t = time.perf_counter()
            store.snapshot("bench", {"phase": "before", "turn": f"t{turn}", "entry": f"e{turn}"})
            times.append((time.perf_counter() - t) * 1000)
            for k in range(3):
                path = root / f"pkg{(turn * 7 + k) % 100:03}" / f"mod{turn % 100:02}.py"
                path.write_text(path.read_text() + f"# turn {turn}\n")
            (root / f"pkg{turn % 100:03}" / f"new{turn}.py").write_text(f"NEW = {turn}\n")
            t = time.perf_counter()
            store.snapshot("bench", {"phase": "after", "turn": f"t{turn}", "entry": f"e{turn}"})
            times.append((time.perf_counter() - t) * 1000)
            growth.append(_disk(shadow) - size)
        report("snapshot after the first, median of 40 (20 turns)", median(times), "ms",
               "< 300 ms")
        report("snapshot after the first, worst of 40", max(times), "ms")
        report(f"checkpoint store after the first snapshot ({FILES:,} files)",
               first_size / 2**20, "MB")
        report("disk growth per turn (3 files edited, 1 added; median of 20)",
               median([float(g) for g in growth]) / 1024, "KB")
        t = time.perf_counter()
        listed = turns(store, "bench")
        report(f"list the turns that changed files ({len(listed)})",
               (time.perf_counter() - t) * 1000, "ms")
        t = time.perf_counter()
        undo(store, "bench", "e1")
        report("undo 20 turns (back before the first: 80 files)",
               (time.perf_counter() - t) * 1000, "ms")

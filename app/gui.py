"""The window's entry point (the desktop shell arrives with its own issue)."""

from __future__ import annotations

import sys


def run_gui(project_dir: str | None) -> int:
    print("workbench: the window is not available yet; see `workbench --help`", file=sys.stderr)
    return 1

"""The set-up a newcomer runs (`make run`, `make test`) checks every system package it needs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_system_deps_checks_each_package_it_names_bubblewrap_included() -> None:
    # Before: the loop went over Qt's libraries only, so a machine without bubblewrap ran
    # every command unsandboxed and nobody was told.
    named = subprocess.run(["make", "-s", "-C", str(ROOT), "--eval=print-pkgs: ; @echo "
                            "$(SYSTEM_PACKAGES)", "print-pkgs"],
                           capture_output=True, text=True, check=True).stdout.split()
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "system-deps"], capture_output=True,
                         text=True, check=True).stdout
    loop = re.search(r"for pkg in ([^;]*);", dry)
    assert loop is not None, dry
    assert "bubblewrap" in named
    assert loop.group(1).split() == named

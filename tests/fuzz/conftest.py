"""The fuzzer's profiles, chosen by WORKBENCH_FUZZ_PROFILE (read once, at import: the shared
fixtures clear WORKBENCH_* variables for each test):

ci    (default) a few short examples, no saved database: the whole fuzz test in about a minute.
long  `make fuzz`: examples for WORKBENCH_FUZZ_SECONDS (600), longer step sequences, every
      failure kept in .fuzz-db/ (git-ignored) and tried again first next time.
explore  WORKBENCH_FUZZ_EXAMPLES (50) examples, not shrunk: the first failure as it came.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ROOT = Path(__file__).resolve().parents[2]
PROFILE = os.environ.get("WORKBENCH_FUZZ_PROFILE", "ci")
SECONDS = float(os.environ.get("WORKBENCH_FUZZ_SECONDS", "600"))
SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# CI's examples are the same every run (derandomize): a red CI is a change of ours, never the
# draw of the day; `make fuzz` explores. CI does not shrink a failure (on a loaded machine that
# can outlast the test's deadline): it prints the steps as found, with the blob to replay.
settings.register_profile("ci", max_examples=20, stateful_step_count=12, deadline=None,
                          database=None, suppress_health_check=SLOW, print_blob=True,
                          derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.register_profile("long", max_examples=10, stateful_step_count=30, deadline=None,
                          database=DirectoryBasedExampleDatabase(str(ROOT / ".fuzz-db")),
                          suppress_health_check=SLOW, print_blob=True)
settings.register_profile("explore", max_examples=int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES",
                                                                     "50")),
                          stateful_step_count=30, deadline=None, database=None,
                          suppress_health_check=SLOW, phases=[Phase.generate])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.fuzz.known_bugs import HITS
    from tests.fuzz.machine import STEPS

    if not STEPS[0]:
        return
    terminalreporter.write_line(f"fuzz: {STEPS[0]} steps checked (profile {PROFILE})")
    for bug, n in sorted(HITS.items()):
        terminalreporter.write_line(f"fuzz: known bug {bug} hit {n} times")

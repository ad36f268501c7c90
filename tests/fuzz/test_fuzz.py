"""The stateful fuzzer (tests/fuzz/machine.py) in the profile WORKBENCH_FUZZ_PROFILE chooses
(tests/fuzz/conftest.py), and every failure it ever found, replayed step by step."""

from __future__ import annotations

import time

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.fuzz.conftest import PROFILE, SECONDS
from tests.fuzz.machine import KEY, Workbench


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key in the environment, as a user's would be: it must reach no file and no request."""
    monkeypatch.setenv("WORKBENCH_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 300 if PROFILE == "long" else 300)
def test_the_core_keeps_its_invariants_whatever_the_user_does() -> None:
    profile = settings.get_profile(PROFILE)
    if PROFILE != "long":
        run_state_machine_as_test(Workbench, settings=profile)
        return
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        run_state_machine_as_test(Workbench, settings=profile)

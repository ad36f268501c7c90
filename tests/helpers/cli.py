"""The `workbench` command run in-process, as the integration tests drive it."""

from __future__ import annotations

import pytest

from app.cli.main import main


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run `workbench ARGS`; its exit code, standard output and standard error."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err

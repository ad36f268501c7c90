"""`make bench`: every benchmark, printing its figures. Tests never time things; this does."""

from __future__ import annotations

import sys

from tests.bench import (
    bench_cache,
    bench_checkpoints,
    bench_cli,
    bench_compaction,
    bench_context,
    bench_first_send,
    bench_gui,
    bench_huge,
    bench_inspector,
    bench_mcp,
    bench_run,
    bench_store,
    bench_storm,
    bench_tools,
)
from tests.bench.common import ROOT

BENCHES = {"store": bench_store.run, "context": bench_context.run, "cli": bench_cli.run,
           "gui": bench_gui.run, "first_send": bench_first_send.run,
           "tools": bench_tools.run,
           "compaction": bench_compaction.run, "inspector": bench_inspector.run, "run": bench_run.run,
           "cache": bench_cache.run, "huge": bench_huge.run, "mcp": bench_mcp.run,
           "checkpoints": bench_checkpoints.run, "storm": bench_storm.run}


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in BENCHES]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHES)}",
              file=sys.stderr)
        return 64
    compile_bytecode()
    for name in names or list(BENCHES):
        BENCHES[name]()
    return 0


def compile_bytecode() -> None:
    """Start-up figures are a user's: Python compiles our modules once and reads the bytecode
    after (`make run` compiles it ahead). Where writing it is off (PYTHONDONTWRITEBYTECODE, as
    some containers set), every start would compile them all again."""
    import compileall

    for folder in ("app", "core", "ui", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

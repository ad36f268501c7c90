"""`.workbench/runs/<run_id>.json`: a cache of a run's state, for people and tools reading the
project folder. The log is the source of truth: the file is rewritten from the log whenever it
is missing, unreadable or says something else, and a disagreement is reported, never trusted."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from core import confined
from core.store.fileio import atomic_write_json
from core.workflows.state import RunState

RUNS_DIR = "runs"
RUN_ID = re.compile(r"^[0-9a-f]{32}$")  # core.model.new_id's shape
MAX_RUN_FILE = 4 * 2**20  # far beyond a run's state; a larger file is rewritten, not read


class RunFiles:
    def __init__(self, state: Path) -> None:
        self.folder = state / RUNS_DIR

    def path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.json"

    def read(self, run_id: str) -> dict[str, object] | None:
        try:
            # Confined: the file may have been made a FIFO or a link to /dev/zero in a clone.
            data = json.loads(confined.read(self.path(run_id).name, MAX_RUN_FILE,
                                            root=self.folder).decode("utf-8"))
        except (OSError, ValueError):  # confined.Refused is an OSError
            return None
        return data if isinstance(data, dict) else None

    def sync(self, conv_id: str, run: RunState) -> str | None:
        """Make the file say what the log says. Returns a sentence when the file was there
        but corrupt or disagreeing with the log (it is rewritten from the log); None when it
        agreed or was missing. A file that cannot be written is left alone: it is a cache."""
        if not RUN_ID.match(run.run_id):
            return None  # not an id this app made (a crafted log): no file named after it
        want = {**run.to_json(), "conversation": conv_id}
        path = self.path(run.run_id)
        problem = None
        if os.path.lexists(path):
            have = self.read(run.run_id)
            if have == want:
                return None
            problem = (f"The saved state of this run ({path.name}) could not be read, so it was "
                       "made again from the conversation; nothing is lost." if have is None else
                       f"The saved state of this run ({path.name}) was behind the conversation "
                       f"(it said {have.get('status')!r} after {have.get('entries')} entries; "
                       f"the conversation says {run.status!r} after {run.entries}), so it was "
                       "brought up to date from the conversation; nothing is lost.")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, want, durable=False)
        except OSError:
            return problem
        return problem

"""The OS sandbox commands run in: bubblewrap where it is installed and can create its
namespaces here, else none (approval is then the only guard, and the prompt says so).

`detect_sandbox` decides once per process; the tool context carries the result
(core.tools.base) and `core.tools.shell` builds a command's bubblewrap line from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from typing import Literal

ENV_SANDBOX = "WORKBENCH_SANDBOX"  # "none" turns the sandbox off (tests, odd kernels)

# No capability survives into the sandbox, even when the app runs as root (a root command could
# otherwise remount the read-only file system writable, or leave its namespaces), in a user
# namespace of its own; bubblewrap also sets no_new_privs, so nothing inside gains any back.
CONFINE = ("--unshare-user", "--cap-drop", "ALL")


@dataclass(frozen=True)
class Sandbox:
    """Attributes:
        kind: "bubblewrap" or "none".
        bwrap: the bubblewrap executable.
        why: for "none", why there is no sandbox, in one sentence.
    """

    kind: Literal["bubblewrap", "none"]
    bwrap: str | None = None
    why: str = ""

    def describe(self, network: bool = False) -> str:
        """What protects the user, for the approval prompt and Settings."""
        if self.kind == "bubblewrap":
            net = "network allowed" if network else "no network"
            hidden = "" if network else ", Unix sockets in /run hidden"
            return ("bubblewrap sandbox: only the project folder is writable (not .workbench/ "
                    "or .git, even before they exist, nor a nested repository's .git), the "
                    f"rest of the system read-only, no capabilities, {net}{hidden}")
        return (f"no sandbox ({self.why}): the command runs with your user's full rights; "
                "your approval is the only guard")


@cache
def _probe(bwrap: str) -> str:
    """'' when bubblewrap can create its namespaces here, else why not."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *CONFINE,
             "--unshare-pid", "--unshare-net", "--die-with-parent", "true"],
            capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not start: {e}"
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        return "bubblewrap cannot create a sandbox here" + (f" ({err[-1]})" if err else "")
    return ""


def detect_sandbox(env: dict[str, str] | None = None) -> Sandbox:
    """The sandbox commands get on this machine (probed once per process)."""
    env = dict(os.environ) if env is None else env
    if env.get(ENV_SANDBOX, "").lower() == "none":
        return Sandbox("none", why=f"turned off by {ENV_SANDBOX}=none")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Sandbox("none", why="bubblewrap is not installed; apt-get install bubblewrap")
    problem = _probe(bwrap)
    return Sandbox("none", why=problem) if problem else Sandbox("bubblewrap", bwrap)

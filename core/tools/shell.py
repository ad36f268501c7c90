"""run_shell: a command in the project folder, inside an OS sandbox where one exists.

On Linux the sandbox is bubblewrap, the way Codex contains commands: the whole file system is
mounted read-only, the project folder writable (its `.workbench/` and `.git/`, and nested
repositories' `.git`, read-only), a private /tmp, no network unless the user allowed it for the
conversation, and a PID namespace so killing the sandbox kills everything the command started.
Where bubblewrap is missing or cannot create namespaces, commands run unconfined and approval is
the only guard (the prompt says so).

Output (stdout and stderr interleaved, as in a terminal) goes straight from the process to a file
and is never held in memory; the runner keeps it, or a preview of it when it is large. The whole
process group is killed on time-out, on runaway output and on Stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

from pydantic import Field

from core import confined
from core.redact import SECRET_NAME
from core.stand_ins import remove_stand_ins
from core.threads import wait_within
from core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput, running_file
from core.tools.sandbox import CONFINE, Sandbox

DEFAULT_TIMEOUT = 120
MAX_OUTPUT_BYTES = 256 * 2**20  # a command printing more is stopped
POLL_S = 0.1


def tool_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment commands get: the user's, without anything that looks like a secret
    (API keys must never reach a command the model wrote, nor its output in the log)."""
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k)}


def socket_folders(env: dict[str, str] | None = None) -> list[str]:
    """Folders of Unix sockets a command must not reach without the network (D-Bus, the
    keyring, ssh-agent, docker): hidden behind an empty folder. Existing real paths only."""
    env = dict(os.environ) if env is None else env
    found = ["/run", "/var/run", env.get("XDG_RUNTIME_DIR", "")]
    agent = env.get("SSH_AUTH_SOCK", "")
    if agent:
        found.append(str(Path(agent).parent))
    out: list[str] = []
    for folder in found:
        if folder and os.path.isdir(folder):
            real = os.path.realpath(folder)
            if real != "/" and real not in out:
                out.append(real)
    return out


def command_argv(sandbox: Sandbox, root: Path, command: str, network: bool,
                 env: dict[str, str] | None = None) -> list[str]:
    shell = shutil.which("bash") or "/bin/sh"
    inner = [shell, "-c", command]
    if sandbox.kind != "bubblewrap" or sandbox.bwrap is None:
        return inner
    argv = [sandbox.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp"]
    if not network:
        for folder in socket_folders(env):
            if not root.is_relative_to(folder):  # (the project is bound again below anyway)
                argv += ["--tmpfs", folder]
    argv += ["--bind", str(root), str(root)]
    for path in protected_paths(root):
        if os.path.lexists(path):
            argv += ["--ro-bind", str(path), str(path)]
        else:
            # One that does not exist yet is protected too (a command must not create
            # .git/hooks/pre-commit for git to run later, unsandboxed): an empty read-only
            # folder stands in its place while the command runs. A folder, not a file: git
            # takes an empty `.git` folder for no repository (and `git init` fills it), where an
            # empty file breaks every git command there. Its mount point is made on the host;
            # it is removed after the command, or when the project next opens if the app was
            # killed meanwhile (see `remove_stand_ins`).
            argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
    argv += [*CONFINE, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
             "--new-session", "--chdir", str(root)]
    if not network:
        argv.append("--unshare-net")
    return [*argv, "--", *inner]


PROTECTED = (".workbench", ".git")


MAX_GITDIR_FILE = 2**16  # a `.git` file holds one `gitdir:` line
MAX_WALK = 20_000  # folders looked at for nested repositories' `.git`, per command


def protected_paths(root: Path) -> list[Path]:
    """What a command may not change in the project: `.workbench/` and `.git` whether or not
    they exist, the folder a `.git` file's `gitdir:` names when it is in the project, and the
    `.git` of every repository nested in the project (a clone in `lib/`: a hook planted there
    would run, unsandboxed, at the user's next commit in it)."""
    paths = [root / name for name in PROTECTED]
    git = root / ".git"
    if git.is_file() and not git.is_symlink():
        try:  # a project's file: a FIFO or a sparse giant here must not hang every command
            first = confined.read(".git", MAX_GITDIR_FILE, root=root).decode(
                "utf-8", errors="replace").splitlines()[:1]
        except OSError:
            first = []
        if first and first[0].startswith("gitdir:"):
            target = (root / first[0][len("gitdir:"):].strip()).resolve()
            if target.is_dir() and target.is_relative_to(root) and target != root:
                paths.append(target)
    return paths + _nested_git(root)


def _nested_git(root: Path) -> list[Path]:
    """The `.git` folders and files below the project's top (links not followed: a link's
    target outside the project is read-only anyway), looked for in at most MAX_WALK folders."""
    found: list[Path] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here != root and ".git" in (*dirs, *files) and not (here / ".git").is_symlink():
            found.append(here / ".git")
        dirs[:] = [d for d in dirs if d not in PROTECTED and not (here / d).is_symlink()]
        seen += 1
        if seen >= MAX_WALK:
            break
    return found


class ShellArgs(ToolArgs):
    command: str = Field(description="A bash command line, run in the project folder.")
    timeout: int = Field(default=DEFAULT_TIMEOUT, ge=1, le=3600,
                         description="Seconds before the command is killed.")


async def run_shell(args: ShellArgs, ctx: ToolContext) -> ToolOutput:
    sandbox = ctx.sandbox or Sandbox("none", why="unset")
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    out_path = running_file(ctx.state, ctx.conv_id, ctx.call_id)
    absent = [p for p in protected_paths(ctx.root) if not os.path.lexists(p)] \
        if sandbox.kind == "bubblewrap" else []
    argv = command_argv(sandbox, ctx.root, args.command, ctx.network, ctx.env)
    try:
        return await _run(argv, args, ctx, out_path)
    finally:
        remove_stand_ins(ctx.root, absent)


async def _run(argv: list[str], args: ShellArgs, ctx: ToolContext, out_path: Path
               ) -> ToolOutput:
    try:
        with open(out_path, "wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                stderr=asyncio.subprocess.STDOUT, cwd=ctx.root,
                env=ctx.env if ctx.env is not None else tool_environment(),
                start_new_session=True)
    except BaseException:  # Stop while it starts (asyncio kills it): what it printed goes too
        out_path.unlink(missing_ok=True)
        raise
    started = time.monotonic()
    ended = ""
    try:
        while True:
            try:
                await wait_within(proc.wait(), POLL_S)
                break
            except TimeoutError:
                pass
            if time.monotonic() - started > args.timeout:
                ended = f"timed out after {args.timeout} s; the command and everything it " \
                        "started were killed"
            elif out_path.stat().st_size > MAX_OUTPUT_BYTES:
                ended = (f"stopped: it printed more than {MAX_OUTPUT_BYTES // 2**20} MB; the "
                         "command and everything it started were killed")
            if ended:
                _kill(proc.pid)
                await proc.wait()
                break
    except BaseException:  # Stop (cancelled) or anything else: nothing may outlive the turn
        _kill(proc.pid)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
        out_path.unlink(missing_ok=True)
        raise
    code = proc.returncode
    if ended:
        header = f"[{ended}]\n"
    elif code is not None and code < 0:
        header = f"[killed by signal {-code}]\n"
    else:
        header = f"[exit code {code}]\n"
    if out_path.stat().st_size == 0:
        header += "(no output)\n"
    ok = not ended and code == 0
    return ToolOutput(status="ok" if ok else "error", exit_code=code, file=out_path,
                      header=header)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


RUN_SHELL = Tool(
    "run_shell",
    "Run a bash command in the project folder and get its output (stdout and stderr "
    "interleaved) and exit code. Non-interactive: no input can be given. Long-running or "
    "endless commands are killed at the timeout.",
    ShellArgs, "execute", run_shell, key_arg="command")

"""The shadow git repository checkpoints live in, run safely.

`git --git-dir=<state>/checkpoints.git --work-tree=<project>`: the real git binary the user
already has, its index stat cache (an unchanged file is not read again) and its object store
(an unchanged file is not stored again), and `.gitignore` honoured natively. The project's own
`.git` is never named, so its HEAD, index, stash and branches are never touched.

The project folder is untrusted input: it may arrive by `git clone` with a
`.workbench/checkpoints.git` already in it, and git configuration can run commands
(core.fsmonitor, filter drivers, hooks, diff.external, ...). So git runs with an environment of
our making (nothing of the user's GIT_* leaks in), no system or global configuration, the
command-running settings switched off on the command line, and the repository's own `config`,
`HEAD`, `info/exclude` and `info/attributes` rewritten with our fixed content before each use
(we own them); the files that would send git elsewhere (commondir, alternates, grafts) are
removed. Argument lists, never a shell.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from core.store.fileio import atomic_write_bytes

GIT_DIR_NAME = "checkpoints.git"
# Always left out, whatever the project's .gitignore says.
ALWAYS_EXCLUDED = "/.git/\n/.workbench/\n.git\n"
CONFIG = """[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = {filemode}
\tsymlinks = true
\tlogallrefupdates = false
\tfsmonitor = false
\thooksPath = {null}
\tautocrlf = false
\tsafecrlf = false
\tuntrackedCache = true
\tquotePath = false
\tbigFileThreshold = 8m
[gc]
\tauto = 0
[advice]
\taddEmbeddedRepo = false
\tdetachedHead = false
"""
# Files a shipped repository could carry to point git at other objects or refs.
FOREIGN = ("commondir", "gitdir", "objects/info/alternates", "objects/info/http-alternates",
           "info/grafts", "shallow")
# The highest-precedence attributes: a file is stored byte for byte, whatever the project's
# .gitattributes say (no line-ending conversion, filter, ident or re-encoding), so a restore
# writes back exactly what was there.
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"


class GitMissing(RuntimeError):
    """No git binary: checkpoints are off (said once, never an error in a turn)."""


class GitFailed(RuntimeError):
    """A git command failed; the message says which and why."""


def find_git() -> str | None:
    return shutil.which("git")


class ShadowGit:
    """One project's checkpoint repository, and the one way to run git on it."""

    def __init__(self, root: Path, state: Path) -> None:
        self.root = root
        self.git_dir = state / GIT_DIR_NAME
        self._exe: str | None = None

    # --- setup ---------------------------------------------------------------------------------

    def exe(self) -> str:
        if self._exe is None:
            found = find_git()
            if found is None:
                raise GitMissing("git is not installed (or not on PATH), so agent turns are "
                                 "not checkpointed: their file changes cannot be listed or "
                                 "undone. Install git to turn checkpoints on.")
            self._exe = found
        return self._exe

    def prepare(self) -> None:
        """Make the repository if it is missing, and (re)write what we own in it."""
        self.exe()
        gd = self.git_dir
        if gd.is_symlink() or (gd.exists() and not gd.is_dir()):
            raise GitFailed(f"{gd} is not a folder of ours (a link or a file); checkpoints "
                            "are off until it is removed")
        for sub in ("objects", "refs", "info"):
            if (gd / sub).is_symlink():  # a folder from elsewhere: never written through
                (gd / sub).unlink()
            (gd / sub).mkdir(parents=True, exist_ok=True)
        for name in FOREIGN:
            target = gd / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
        hooks = gd / "hooks"
        if hooks.exists() and not hooks.is_symlink():
            shutil.rmtree(hooks, ignore_errors=True)
        filemode = "false" if sys.platform == "win32" else "true"
        _write_if_changed(gd / "config", CONFIG.format(filemode=filemode,
                                                       null=os.devnull).encode())
        _write_if_changed(gd / "HEAD", b"ref: refs/heads/main\n")
        _write_if_changed(gd / "info" / "exclude", ALWAYS_EXCLUDED.encode())
        _write_if_changed(gd / "info" / "attributes", ATTRIBUTES.encode())

    def check_ours(self) -> None:
        """Without writing: the repository is as `prepare` leaves it (no link, no hooks, our
        config), else GitFailed; for a process that only reads."""
        self.exe()
        gd = self.git_dir
        filemode = "false" if sys.platform == "win32" else "true"
        ours = CONFIG.format(filemode=filemode, null=os.devnull).encode()
        links = [p for p in (gd, gd / "objects", gd / "refs", gd / "info", gd / "config",
                             gd / "HEAD") if p.is_symlink()]
        try:
            config = (gd / "config").read_bytes() if not links else b""
        except OSError:
            config = b""
        if links or config != ours or (gd / "hooks").exists() or \
                any((gd / name).exists() for name in FOREIGN):
            raise GitFailed("the checkpoint store is not as this app left it; open the project "
                            "for writing (close the window that has it) to repair it")

    # --- running -------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The whole environment git gets: nothing of the user's GIT_* settings."""
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.devnull, "XDG_CONFIG_HOME": os.devnull,
            "LC_ALL": "C", "LANG": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Context Workbench",
            "GIT_AUTHOR_EMAIL": "checkpoints@workbench.invalid",
            "GIT_COMMITTER_NAME": "Context Workbench",
            "GIT_COMMITTER_EMAIL": "checkpoints@workbench.invalid",
        }
        for keep in ("SYSTEMROOT", "TMPDIR", "TEMP", "TMP"):  # what git itself may need
            if keep in os.environ:
                env[keep] = os.environ[keep]
        return env

    def argv(self, *args: str) -> list[str]:
        return [self.exe(), f"--git-dir={self.git_dir}", f"--work-tree={self.root}",
                "-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}",
                "-c", f"core.excludesFile={self.git_dir / 'info' / 'exclude'}",
                "-c", "core.untrackedCache=true", *args]

    def run(self, *args: str, input: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        """git `args` on the shadow repository; its standard output. Raises GitFailed."""
        try:
            done = subprocess.run(self.argv(*args), input=input, capture_output=True,
                                  env=self.env(), cwd=self.root, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise GitFailed(f"git {args[0]} could not run: {e}") from e
        if done.returncode not in ok:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitFailed(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
        return done.stdout

    def text(self, *args: str, input: bytes | None = None) -> str:
        return self.run(*args, input=input).decode("utf-8", "surrogateescape").strip()

    def ref(self, name: str) -> str | None:
        out = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", ok=(0, 1))
        return out.decode().strip() or None

    def blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The contents of these blobs, read in one `cat-file --batch`."""
        if not shas:
            return {}
        wanted = list(dict.fromkeys(shas))
        out = self.run("cat-file", "--batch", input="".join(s + "\n" for s in wanted).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for sha in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            if len(header) != 3:
                raise GitFailed(f"a checkpoint's file is missing from the store ({sha})")
            size = int(header[2])
            found[sha] = out[end + 1:end + 1 + size]
            pos = end + 1 + size + 1
        return found


def _write_if_changed(path: Path, content: bytes) -> None:
    try:
        if not path.is_symlink() and path.read_bytes() == content:
            return
    except OSError:
        pass
    if path.is_symlink() or path.is_dir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    atomic_write_bytes(path, content, durable=False)

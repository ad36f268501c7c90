"""File tools: read, list, search (read-only) and write, edit (ask first).

`edit_file` is the edit model agents actually use: replace one exact snippet that occurs exactly
once, so an edit never lands somewhere the model did not mean; a missing or ambiguous snippet is
an error that says which and where.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from core import confined
from core.confined import Refused, kind_of
from core.threads import in_daemon_thread
from core.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from core.tools.paths import IGNORED_DIRS, display, resolve
from core.tools.results import page

MAX_READ_BYTES = 20 * 2**20  # read_file refuses larger files (a command can still page them)
MAX_SEARCH_FILE = 4 * 2**20  # search_files skips larger files
MAX_MATCHES = 200
MAX_LIST = 1000
SNIFF = 8192


FILE_IO_DEADLINE_S = 60.0  # a file tool's I/O that takes longer is abandoned with a sentence


async def in_thread(fn: Callable[..., str], *args: Any) -> str:
    """A file tool's I/O, off the turn's loop: Stop returns at once, and a file system that
    does not answer within the deadline is said to."""
    try:
        return await in_daemon_thread(fn, *args, deadline=FILE_IO_DEADLINE_S)
    except TimeoutError:
        raise ToolError(f"The file system did not answer within {FILE_IO_DEADLINE_S:g} s (a "
                        "stuck network drive?); the tool was abandoned.") from None


def read_regular(root: Path, path: Path, name: str, limit: int) -> bytes:
    """The whole of `path` (inside the project `root`, a regular file, at most `limit` bytes),
    read by the one confined reader; a refusal is the tool's error."""
    try:
        return confined.read(path, limit, root=root, name=name)
    except Refused as e:
        raise ToolError(f"{e}; it is not read.") from None


def is_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(sample) - 4  # not just a character cut at the sample's end
    return False


def _kind(sample: bytes) -> str:
    for magic, name in ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
                        (b"GIF8", "a GIF image"), (b"%PDF", "a PDF document"),
                        (b"PK\x03\x04", "a ZIP archive"), (b"\x7fELF", "an executable"),
                        (b"\x1f\x8b", "a gzip archive")):
        if sample.startswith(magic):
            return name
    return "binary data"


# --- read_file -----------------------------------------------------------------------------------


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the project folder.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int = Field(default=2000, ge=1, le=10000, description="How many lines to read.")


async def read_file(args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve(ctx.root, args.path)
    return ToolOutput(await in_thread(_read_page, ctx.root, path, args))


def _read_page(root: Path, path: Path, args: ReadFileArgs) -> str:
    name = display(root, path)
    if path.is_dir():
        raise ToolError(f"{name} is a folder; list_dir shows what it holds.")
    try:
        data = confined.read(path, MAX_READ_BYTES, root=root, name=name)
    except Refused as e:
        hint = (" search_files finds lines in it, or run_shell can show a part (head, tail, "
                "sed -n).") if e.reason == "size" else ""
        raise ToolError(f"{e}; read_file does not read it.{hint}") from None
    if is_binary(data[:SNIFF]):
        raise ToolError(f"{name} is {_kind(data[:SNIFF])} ({len(data):,} bytes), not text; it "
                        "is not shown.")
    lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=None)
    return page(lines, args.offset, args.limit, name)


# --- list_dir ------------------------------------------------------------------------------------


class ListDirArgs(ToolArgs):
    path: str = Field(default=".", description="Folder relative to the project folder.")
    depth: int = Field(default=2, ge=1, le=6, description="How many levels to show.")


async def list_dir(args: ListDirArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve(ctx.root, args.path)
    if not path.is_dir():
        raise ToolError(f"{display(ctx.root, path)} is not a folder.")
    return ToolOutput(await in_thread(_tree, ctx.root, path, args.depth))


def _tree(root: Path, top: Path, depth: int) -> str:
    lines = [f"{display(root, top)}/"]
    shown = 0
    cut = False

    def walk(folder: Path, level: int) -> None:
        nonlocal shown, cut
        try:
            children = sorted(os.scandir(folder), key=lambda e: (not e.is_dir(), e.name.lower()))
        except OSError as e:
            lines.append("  " * level + f"(cannot list: {e.strerror})")
            return
        for child in children:
            if child.name in IGNORED_DIRS:
                continue
            if shown >= MAX_LIST:
                cut = True
                return
            shown += 1
            if child.is_dir(follow_symlinks=False):
                lines.append("  " * level + f"{child.name}/")
                if level < depth:
                    walk(Path(child.path), level + 1)
            else:
                try:
                    size = child.stat(follow_symlinks=False).st_size
                except OSError:
                    size = 0
                link = " -> (link)" if child.is_symlink() else ""
                lines.append("  " * level + f"{child.name}  ({size:,} bytes){link}")

    walk(top, 1)
    if cut:
        lines.append(f"… more entries not shown (first {MAX_LIST}); list a subfolder.")
    if len(lines) == 1:
        lines.append("  (empty)")
    return "\n".join(lines)


# --- search_files --------------------------------------------------------------------------------


class SearchArgs(ToolArgs):
    pattern: str = Field(description="Regular expression (Python syntax) to find in lines.")
    path: str = Field(default=".", description="Folder (or file) to search in.")
    glob: str | None = Field(default=None, description="Only files whose name matches, "
                                                        "e.g. '*.py'.")
    ignore_case: bool = False


async def search_files(args: SearchArgs, ctx: ToolContext) -> ToolOutput:
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as e:
        raise ToolError(f"The pattern is not a valid regular expression: {e}.") from e
    top = resolve(ctx.root, args.path)
    if not top.exists():
        raise ToolError(f"{display(ctx.root, top)} does not exist.")
    return ToolOutput(await in_thread(_search, ctx.root, top, regex, args.glob))


def _files(top: Path, glob: str | None) -> Iterator[Path]:
    if top.is_file():
        yield top
        return
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in sorted(files):
            if glob is None or Path(name).match(glob):
                yield Path(folder) / name


def _search(root: Path, top: Path, regex: re.Pattern[str], glob: str | None) -> str:
    out: list[str] = []
    skipped = 0
    for path in _files(top, glob):
        try:
            data = confined.read(path, MAX_SEARCH_FILE, root=root)
        except Refused as e:  # a link out, a FIFO, a device: never read; too large: said
            skipped += e.reason == "size"
            continue
        if is_binary(data[:SNIFF]):
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                text = line.strip()
                text = text if len(text) <= 300 else text[:300] + " …"
                out.append(f"{display(root, path)}:{number}: {text}")
                if len(out) >= MAX_MATCHES:
                    out.append(f"… stopped at {MAX_MATCHES} matches; narrow the pattern or "
                               "the path.")
                    return "\n".join(out)
    if skipped:
        out.append(f"({skipped} file(s) over {MAX_SEARCH_FILE // 2**20} MB not searched)")
    return "\n".join(out) if out else "No matches."


# --- write_file and edit_file --------------------------------------------------------------------


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the project folder.")
    content: str = Field(description="The whole new content of the file.")


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the project folder.")
    old: str = Field(description="The exact text to replace; it must occur exactly once "
                                 "(include surrounding lines to make it unique).")
    new: str = Field(description="The replacement text.")


def _read_text(root: Path, path: Path, name: str) -> str:
    """The file's text, decoded strictly: a change is written back as UTF-8, so a file that is
    not UTF-8 would have bytes changed that no diff shows."""
    try:
        data = confined.read(path, MAX_READ_BYTES, root=root, name=name)
    except Refused as e:
        if e.missing:
            raise ToolError(f"{name} does not exist.") from None
        if e.reason == "size":  # never a prefix written back: that would cut the file
            raise ToolError(f"{name} is over {MAX_READ_BYTES // 2**20} MB, more than write_file "
                            "and edit_file change; nothing was changed. run_shell can change it "
                            "in place (sed -i, patch).") from None
        raise ToolError(f"{e}; it is not read.") from None
    if is_binary(data[:SNIFF]):
        raise ToolError(f"{name} is {_kind(data[:SNIFF])}, not text; it cannot be edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(
            f"{name} is not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start:,}): "
            "changing it here would alter bytes the diff cannot show, so nothing was changed. "
            "Convert it first (run_shell: iconv), or leave it as it is.") from None


def planned_content(args: ToolArgs, root: Path) -> tuple[Path, str | None, str]:
    """(path, current text or None when new, text after the change); raises ToolError."""
    if isinstance(args, WriteFileArgs):
        path = resolve(root, args.path, write=True)
        if path.is_dir():
            raise ToolError(f"{display(root, path)} is a folder.")
        old = _read_text(root, path, display(root, path)) if path.exists() else None
        return path, old, args.content
    assert isinstance(args, EditFileArgs)
    path = resolve(root, args.path, write=True)
    name = display(root, path)
    text = _read_text(root, path, name)
    if not args.old:
        raise ToolError("`old` is empty; give the exact text to replace.")
    count = text.count(args.old)
    if count == 0:
        hint = ""
        if " ".join(args.old.split()) in " ".join(text.split()):
            hint = " It does occur with different whitespace or line breaks; copy it exactly."
        raise ToolError(f"The text to replace was not found in {name}.{hint} Read the file "
                        "again and copy the snippet exactly.")
    if count > 1:
        lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(args.old),
                                                                          text)]
        raise ToolError(f"The text to replace occurs {count} times in {name} (lines "
                        f"{', '.join(map(str, lines[:10]))}); include more surrounding lines "
                        "so it occurs once.")
    return path, text, text.replace(args.old, args.new, 1)


MAX_DIFF_INPUT = 2 * 2**20  # larger files are described, not diffed (difflib is quadratic)
MAX_DIFF_SHOWN = 200_000  # characters of a diff shown for approval


def unified_diff(root: Path, path: Path, old: str | None, new: str) -> str:
    """The change as a unified diff, for the user to approve; a huge one is cut, and files too
    large to compare are described in a sentence."""
    name = display(root, path)
    if len(new) + len(old or "") > MAX_DIFF_INPUT:
        before = f"replaces {len((old or '').encode()):,} bytes with" if old is not None \
            else "creates the file with"
        return (f"{name}: {before} {len(new.encode()):,} bytes ({new.count(chr(10)):,} lines); "
                "too large to show as a diff.")
    diff = difflib.unified_diff((old or "").splitlines(keepends=True),
                                new.splitlines(keepends=True),
                                "/dev/null" if old is None else f"a/{name}", f"b/{name}")
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in diff)
    if len(text) > MAX_DIFF_SHOWN:
        cut = text.rfind("\n", 0, MAX_DIFF_SHOWN) + 1
        rest = text[cut:].count("\n")
        text = text[:cut] + f"… {rest:,} more lines of the diff not shown\n"
    return text or f"(no change to {name})"


async def apply_change(args: WriteFileArgs | EditFileArgs, ctx: ToolContext) -> ToolOutput:
    """write_file and edit_file: exactly the change that was approved (`ctx.change`), and only
    if the file is still as it was then; without an approval, the change planned now."""
    if ctx.change is None:
        path, old, new = planned_content(args, ctx.root)
    else:
        path, old, new = ctx.change
        name = display(ctx.root, path)
        try:
            unchanged = (_read_text(ctx.root, path, name) if os.path.lexists(path) else None) == old
        except ToolError:  # it cannot be read as text now: not as it was
            unchanged = False
        if not unchanged:
            raise ToolError(f"{name} changed while this change waited for approval; nothing "
                            "was written (your change to it is kept). Read it again and make "
                            "the change anew.")
    return ToolOutput(_write(ctx.root, path, old, new))


def _write(root: Path, path: Path, old: str | None, new: str) -> str:
    name = display(root, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _still_inside(root, path, name)
        mode = _mode_to_keep(path, name)
        # A new file of a random name, made here and now (never an existing one, never through
        # a link): a file planted in the project cannot redirect the write.
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".workbench-tmp",
                                        dir=path.parent)
    except OSError as e:
        raise ToolError(f"Could not write {name}: {e.strerror or e}.") from e
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(new)
            os.fchmod(f.fileno(), mode)
        _still_inside(root, path, name)  # nothing on the way was swapped for a link meanwhile
        os.replace(tmp, path)  # replaces a link at `path` itself, never what it points to
    except (OSError, ToolError) as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, ToolError):
            raise
        raise ToolError(f"Could not write {name}: {e.strerror or e}.") from e
    lines = new.count("\n") + (0 if new.endswith("\n") or not new else 1)
    if old is None:
        return f"Created {display(root, path)} ({len(new.encode()):,} bytes, {lines:,} lines)."
    if len(new) + len(old) > MAX_DIFF_INPUT:
        return (f"Updated {display(root, path)} (now {lines:,} lines, "
                f"{len(new.encode()):,} bytes).")
    diff = unified_diff(root, path, old, new)
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines()
                  if ln.startswith("-") and not ln.startswith("---"))
    return (f"Updated {display(root, path)}: +{added} -{removed} lines "
            f"(now {lines:,} lines).")


def _still_inside(root: Path, path: Path, name: str) -> None:
    """`path`'s folder is still the real folder inside the project it was when resolved."""
    if path.parent.resolve() != path.parent or not path.parent.is_relative_to(root):
        raise ToolError(f"{name}: a folder on its path was replaced by a link meanwhile; "
                        "nothing was written.")


def _mode_to_keep(path: Path, name: str) -> int:
    """The permissions the new content gets: the file's own when it exists (a regular file of
    the project), else the usual ones for a new file (rw-r--r--)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0o644
    kind = kind_of(info.st_mode)
    if kind is not None and not stat.S_ISLNK(info.st_mode):
        raise ToolError(f"{name} is {kind}, not a file; nothing was written.")
    return info.st_mode & 0o777 if kind is None else 0o644


READ_FILE = Tool(
    "read_file",
    "Read a text file of the project, with line numbers. Long files come a page at a time: "
    "use offset and limit (in lines) to read on.",
    ReadFileArgs, "read", read_file, key_arg="path")
LIST_DIR = Tool(
    "list_dir", "List a folder of the project as a tree (sizes in bytes), to a given depth.",
    ListDirArgs, "read", list_dir, key_arg="path")
SEARCH_FILES = Tool(
    "search_files",
    "Search the project's text files for a regular expression; answers path:line: text.",
    SearchArgs, "read", search_files, key_arg="pattern")
WRITE_FILE = Tool(
    "write_file", "Create a file, or replace a file's whole content.",
    WriteFileArgs, "write", apply_change, key_arg="path")
EDIT_FILE = Tool(
    "edit_file",
    "Replace one exact snippet of a text file by new text. The snippet must occur exactly once; "
    "read the file first and copy it exactly, with enough lines to be unique.",
    EditFileArgs, "write", apply_change, key_arg="path")

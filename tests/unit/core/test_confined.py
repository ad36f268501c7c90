"""The one reader of project files, on real files: links out, `..`, a FIFO, devices, a socket,
sparse and huge files; every refusal a sentence, none of them blocking or reading past the cap."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from core import confined
from core.confined import Refused

DEADLINE_S = 10.0  # a refusal is immediate; this only keeps a regression from hanging the suite


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "creds.txt").write_text("OUTSIDE-SECRET aws_secret_access_key=x\n")
    return root


def refused_within(fn: Callable[[], bytes]) -> str:
    """What `fn` was refused with, asserting it returned within the deadline (a FIFO read that
    blocks would leave the thread waiting)."""
    outcome: list[BaseException | bytes] = []

    def work() -> None:
        try:
            outcome.append(fn())
        except BaseException as e:  # handed to the test
            outcome.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the read blocked"
    assert isinstance(outcome[0], Refused), outcome[0]
    return str(outcome[0])


def test_a_regular_file_inside_is_read(root: Path) -> None:
    assert confined.read("notes.md", 100, root=root) == b"# Notes\n"
    assert confined.read(root / "notes.md", 100, root=root) == b"# Notes\n"


def test_a_symlink_out_is_refused_and_says_so(root: Path) -> None:
    (root / "AGENTS.md").symlink_to(root.parent / "outside" / "creds.txt")
    said = refused_within(lambda: confined.read("AGENTS.md", 2**20, root=root))
    assert said == "AGENTS.md leads outside the project folder (a symbolic link)"


def test_a_folder_link_out_is_refused(root: Path) -> None:
    (root / "docs").symlink_to(root.parent / "outside")
    said = refused_within(lambda: confined.read("docs/creds.txt", 2**20, root=root))
    assert "leads outside the project folder (a symbolic link)" in said


def test_dot_dot_and_absolute_paths_out_are_refused(root: Path) -> None:
    said = refused_within(lambda: confined.read("../outside/creds.txt", 2**20, root=root))
    assert said == "../outside/creds.txt leads outside the project folder ('..' or an " \
        "absolute path)"
    outside = root.parent / "outside" / "creds.txt"
    assert "leads outside" in refused_within(lambda: confined.read(outside, 2**20, root=root))


def test_a_link_inside_the_project_is_followed(root: Path) -> None:
    (root / "README.md").symlink_to("notes.md")
    assert confined.read("README.md", 100, root=root) == b"# Notes\n"


def test_a_fifo_is_refused_at_once_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe.md")
    said = refused_within(lambda: confined.read("pipe.md", 2**20, root=root))
    assert said == "pipe.md is a named pipe (FIFO), not a file"


def test_a_fifo_named_by_the_user_is_refused_too(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo1")
    said = refused_within(lambda: confined.read(tmp_path / "fifo1", 2**20, root=None,
                                                name="fifo1"))
    assert said == "fifo1 is a named pipe (FIFO), not a file"


def test_dev_zero_is_refused_as_a_device(root: Path) -> None:
    (root / "zero.md").symlink_to("/dev/zero")
    said = refused_within(lambda: confined.read("zero.md", 2**20, root=root))
    assert "leads outside the project folder" in said  # in the project: a link out first
    said = refused_within(lambda: confined.read("/dev/zero", 2**20, root=None))
    assert said == "/dev/zero is a device, not a file"
    said = refused_within(lambda: confined.read(root / "zero.md", 2**20, root=None))
    assert said.endswith("zero.md is a device, not a file")


def test_a_sparse_gigabyte_is_refused_by_its_size(root: Path) -> None:
    big = root / "big.md"
    with open(big, "wb") as f:
        f.truncate(2**30)  # sparse: nothing on disk, a full read would take a gigabyte
    said = refused_within(lambda: confined.read("big.md", 20 * 2**20, root=root))
    assert said == "big.md is 1.0 GB: larger than the 20 MB limit"


def test_a_file_one_byte_over_the_cap_is_refused(root: Path) -> None:
    (root / "data.txt").write_bytes(b"x" * 1025)
    said = refused_within(lambda: confined.read("data.txt", 1024, root=root))
    assert said == "data.txt is 1.0 KB: larger than the 1 KB limit"
    (root / "data.txt").write_bytes(b"x" * 1024)
    assert len(confined.read("data.txt", 1024, root=root)) == 1024


def test_a_unix_socket_is_refused(root: Path) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(root / "s.sock"))
        server.listen(1)
        said = refused_within(lambda: confined.read("s.sock", 2**20, root=root))
    finally:
        server.close()
    assert said == "s.sock is a socket, not a file"


def test_a_folder_and_a_missing_file_are_refused(root: Path) -> None:
    (root / "sub").mkdir()
    assert refused_within(lambda: confined.read("sub", 10, root=root)) == \
        "sub is a folder, not a file"
    with pytest.raises(FileNotFoundError) as e:  # a caller's "no file" stays what it was
        confined.read("gone.md", 10, root=root)
    assert isinstance(e.value, Refused) and e.value.missing
    assert str(e.value) == "gone.md does not exist"


def test_a_refusal_is_an_oserror_with_its_sentence(root: Path) -> None:
    os.mkfifo(root / "pipe.md")
    with pytest.raises(OSError) as e:
        confined.read("pipe.md", 10, root=root)
    assert f"({e.value.strerror or e.value})" == "(pipe.md is a named pipe (FIFO), not a file)"

"""What a project (or the user) names is read by the confined reader, through the real parts:
`send --attach` of a device or a FIFO is refused at once; an attachment ref of the store that is
a link out or a FIFO sends no outside byte and does not block; a run file made a FIFO or a link
to /dev/zero is rebuilt on resume; the @ list offers only the project's regular files and no
secrets. The commands run as real processes with a deadline: the defects were hangs."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.project_files import project_files
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, HttpError
from tests.integration.test_attachments import png
from tests.integration.test_run import WORKFLOW, complete

ROOT = Path(__file__).resolve().parents[2]
SECRET = "OUTSIDE-SECRET-FILE-CONTENT aws_secret_access_key=AKIAFAKEFAKE\n"
DEADLINE_S = 90  # a refusal is at once; this only turns a regression's hang into a failure


@pytest.fixture
def project_dir(project_dir: Path) -> Path:
    project_dir.mkdir()
    return project_dir


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "creds.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def workbench(server: FakeLLMServer, *args: object) -> subprocess.CompletedProcess[str]:
    """`workbench ARGS --model … --api-base …` as a real process, killed past the deadline."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_IMAGES": "1"}
    command = [sys.executable, "-m", "app", *map(str, args), "--model", MODEL, "--api-base",
               server.url]
    try:
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{' '.join(command[3:5])}` did not end within {DEADLINE_S} s: it blocked")


def sent(server: FakeLLMServer) -> str:
    return "\n".join(json.dumps(r.body) for r in server.requests)


@pytest.mark.parametrize("device", ["/dev/zero", "fifo", "link to /dev/urandom"])
def test_send_attach_of_a_device_or_a_fifo_is_refused_at_once(project_dir: Path, tmp_path: Path,
                                                              llm_server: FakeLLMServer,
                                                              device: str) -> None:
    path = Path(device)
    if device == "fifo":
        path = tmp_path / "fifo1"
        os.mkfifo(path)
    elif device.startswith("link"):
        path = tmp_path / "random.txt"
        path.symlink_to("/dev/urandom")
    proc = workbench(llm_server, "send", project_dir, "--new", "--attach", path, "look")
    assert proc.returncode != 0 and not llm_server.requests
    kind = "a named pipe (FIFO)" if device == "fifo" else "a device"
    assert f"is {kind}, not a file; nothing was sent" in proc.stderr


def test_send_attach_of_a_file_outside_the_project_still_works(project_dir: Path, outside: Path,
                                                               llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("seen"))
    proc = workbench(llm_server, "send", project_dir, "--new", "--attach", outside, "look")
    assert proc.returncode == 0, proc.stderr
    assert "OUTSIDE-SECRET-FILE-CONTENT" in sent(llm_server)  # the user chose to send it


def _conversation_with_an_image(project_dir: Path, server: FakeLLMServer) -> tuple[str, Path]:
    (project_dir / "shot.png").write_bytes(png(8, 8))
    server.script(Answer("seen"))
    proc = workbench(server, "send", project_dir, "--new", "--attach",
                     project_dir / "shot.png", "look")
    assert proc.returncode == 0, proc.stderr
    kept = list((project_dir / ".workbench" / "attachments").iterdir())
    assert len(kept) == 1
    kept[0].unlink()
    return proc.stderr.split()[1], kept[0]


def test_an_attachment_ref_linked_outside_is_not_sent(project_dir: Path, outside: Path,
                                                      llm_server: FakeLLMServer) -> None:
    conv, stored = _conversation_with_an_image(project_dir, llm_server)
    stored.symlink_to(outside)  # what a cloned project can ship under an image's name
    llm_server.script(Answer("again"))
    proc = workbench(llm_server, "send", project_dir, "-c", conv, "and now?")
    assert proc.returncode == 0, proc.stderr
    last = json.dumps(llm_server.requests[-1].body)
    assert base64.b64encode(SECRET.encode()).decode()[:24] not in last
    # the link is removed as the project opens (.workbench/ holds no link of ours), so the
    # image is missing: a note in its place, never the file it pointed at
    assert "is not available" in last or "the image is not sent" in last
    assert "removed a symbolic link the project's .workbench/ held" in proc.stderr


def test_an_attachment_ref_that_is_a_fifo_does_not_block_a_send(project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    conv, stored = _conversation_with_an_image(project_dir, llm_server)
    os.mkfifo(stored)
    llm_server.script(Answer("again"))
    proc = workbench(llm_server, "send", project_dir, "-c", conv, "and now?")
    assert proc.returncode == 0, proc.stderr
    assert "is a named pipe (FIFO), not a file; the image is not sent" in \
        json.dumps(llm_server.requests[-1].body)


@pytest.mark.parametrize("planted", ["fifo", "link to /dev/zero"])
def test_a_run_file_made_a_fifo_or_dev_zero_is_rebuilt_on_resume(project_dir: Path, tmp_path: Path,
                                                                 llm_server: FakeLLMServer,
                                                                 planted: str) -> None:
    flow = tmp_path / "release.json"
    flow.write_text(json.dumps(WORKFLOW))
    llm_server.script(complete("c1", "listed"), HttpError(500, "down"))
    proc = workbench(llm_server, "run", project_dir, "--new", "--workflow", flow)
    assert proc.returncode == 2, proc.stderr
    run_file = next((project_dir / ".workbench" / "runs").glob("*.json"))
    run_file.unlink()
    if planted == "fifo":
        os.mkfifo(run_file)
    else:
        run_file.symlink_to("/dev/zero")
    with Project.open(project_dir, read_only=True) as p:
        conv = p.conversations.list()[0].id
    llm_server.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Done."))
    proc = workbench(llm_server, "run", project_dir, "--conversation", conv, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert run_file.is_file() and not run_file.is_symlink()  # made again from the log
    assert json.loads(run_file.read_text())["status"] == "finished"


def test_the_at_list_offers_only_the_projects_regular_files_and_no_secrets(project_dir: Path,
                                                                          outside: Path) -> None:
    for name in ("notes.md", "src/app.py", ".env", ".env.local", "server.pem", "tls.key",
                 "id_ed25519", "deploy/id_rsa.pub"):
        (project_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (project_dir / name).write_text("x")
    (project_dir / "leak.md").symlink_to(outside)
    (project_dir / "zero.md").symlink_to("/dev/zero")
    (project_dir / "docs").symlink_to(outside.parent, target_is_directory=True)
    (project_dir / "readme.md").symlink_to("notes.md")  # a link inside: offered
    os.mkfifo(project_dir / "pipe.md")
    os.mkfifo(project_dir / "src" / ".gitignore")  # a FIFO .gitignore must not block the list
    listed: list[list[str]] = []
    thread = threading.Thread(target=lambda: listed.append(project_files(project_dir)[0]),
                              daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "listing the project's files blocked"
    assert listed[0] == ["notes.md", "readme.md", "src/app.py"]


def test_a_state_file_made_a_fifo_is_reported_not_waited_on(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create("planted").id
    meta = project_dir / ".workbench" / "conversations" / conv / "conversation.json"
    meta.unlink()
    os.mkfifo(meta)
    problems: list[list[str]] = []

    def look() -> None:
        with Project.open(project_dir) as p:
            problems.append(p.conversations.meta_and_problems(conv)[1])

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "reading conversation.json blocked"
    assert problems[0] and "conversation.json could not be read" in problems[0][0]


def test_a_link_planted_under_an_images_name_is_replaced_when_the_image_is_attached(
        project_dir: Path, outside: Path, llm_server: FakeLLMServer) -> None:
    image = png(8, 8)
    from hashlib import sha256
    store = project_dir / ".workbench" / "attachments"
    store.mkdir(parents=True)
    outside.write_bytes((SECRET * 10).encode()[:len(image)])  # the same size: it looked kept
    (store / f"{sha256(image).hexdigest()}.png").symlink_to(outside)
    (project_dir / "shot.png").write_bytes(image)
    llm_server.script(Answer("seen"))
    proc = workbench(llm_server, "send", project_dir, "--new", "--attach",
                     project_dir / "shot.png", "look")
    assert proc.returncode == 0, proc.stderr
    assert base64.b64encode(image).decode() in sent(llm_server)
    assert [p.read_bytes() for p in store.iterdir() if not p.is_symlink()] == [image]


def test_a_log_made_a_fifo_is_said_to_be_unreadable_not_waited_on(project_dir: Path) -> None:
    from core.model import ConversationMessage
    from core.store.errors import ConversationUnreadable, StoreError

    with Project.open(project_dir) as p:
        conv = p.conversations.create("planted").id
        p.conversations.append(conv, ConversationMessage(role="user", content="hi"))
        other = p.conversations.create("other").id
        p.conversations.append(other, ConversationMessage(role="user", content="hi"))
    log = project_dir / ".workbench" / "conversations" / conv / "messages.jsonl"
    log.unlink()
    os.mkfifo(log)
    seen: list[object] = []

    def look() -> None:
        with Project.open(project_dir) as p:
            seen.append(p.conversations.message_count(conv))
            try:
                p.conversations.load(conv)
            except ConversationUnreadable as e:
                seen.append(str(e))
            seen.append(p.conversations.search("hi"))
            with pytest.raises(StoreError):
                p.conversations.fork(conv, None)
            p.conversations.delete(other)  # looks into the other logs for shared images
            seen.append("deleted")

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "reading the log blocked"
    assert seen[0] == 0 and "is a named pipe (FIFO), not a file" in str(seen[1])
    assert seen[2:] == [{other}, "deleted"]

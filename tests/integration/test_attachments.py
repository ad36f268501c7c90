"""Attachments through the real parts: `workbench send --attach` against the loopback server
sends a text file as a headed text part and an image as an image_url part (only to a model
that takes images), counts them as the request does, keeps image bytes once under
.workbench/attachments, and export --format openai → import gives the same bytes back."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from core.attachments import AttachmentStore, attach_bytes, image_size
from core.llm.tokens import TokenCounter, image_tokens
from core.store.project import Project
from core.store.requests import latest_request
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

COUNTER = TokenCounter("o200k_base")


def png(width: int, height: int, shade: int = 0) -> bytes:
    """A real PNG of one colour (any viewer opens it)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes([shade, 128, 255 - shade]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                                0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture
def project_dir(project_dir: Path) -> Path:
    project_dir.mkdir()
    return project_dir


def send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer, *args: object,
         text: str = "please look") -> tuple[int, str, str]:
    server.script(Answer("seen"))
    return cli(capsys, "send", project, "--new", "--model", MODEL, "--api-base", server.url,
               *args, text)


def test_a_text_file_is_a_headed_text_part_of_the_message(capsys: pytest.CaptureFixture[str],
                                                          project_dir: Path,
                                                          llm_server: FakeLLMServer) -> None:
    (project_dir / "src").mkdir()
    source = "def add(a, b):\n    return a + b\n"
    (project_dir / "src" / "calc.py").write_text(source, encoding="utf-8")
    code, out, err = send(capsys, project_dir, llm_server, "--attach",
                          project_dir / "src" / "calc.py")
    assert code == 0, err
    user = llm_server.requests[-1].body["messages"][-1]
    assert user["role"] == "user" and user["content"][0] == {"type": "text",
                                                             "text": "please look"}
    attached = user["content"][1]["text"]
    assert attached.startswith("Attached file src/calc.py (32 bytes):\n```\n")
    assert source in attached


def test_an_image_goes_to_a_vision_model_inline_and_is_kept_once(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")  # this (local) model reads images
    image = png(1024, 1024)
    (project_dir / "shot.png").write_bytes(image)
    code, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "shot.png")
    assert code == 0, err
    part = llm_server.requests[-1].body["messages"][-1]["content"][1]
    assert part == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(image).decode()}}
    kept = list((project_dir / ".workbench" / "attachments").iterdir())
    assert [p.read_bytes() for p in kept] == [image]
    conv = err.split()[1]
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL, "--json")
    messages = json.loads(out)["messages"]
    logged = messages[1]["content"][1]["image_url"]  # the log refers to the kept bytes
    assert logged["url"] == f"attachment:{kept[0].name}" and logged["name"] == "shot.png"
    assert (logged["width"], logged["height"]) == (1024, 1024)
    # the same image again is the same file
    send(capsys, project_dir, llm_server, "--attach", project_dir / "shot.png")
    assert len(list((project_dir / ".workbench" / "attachments").iterdir())) == 1


def test_an_image_for_a_model_without_vision_is_refused_before_sending(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    (project_dir / "shot.png").write_bytes(png(8, 8))
    code, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "shot.png")
    assert code != 0 and "does not take images" in err and "WORKBENCH_IMAGES=1" in err
    assert "nothing was sent" in err and not llm_server.requests


def test_an_image_in_the_history_is_a_note_for_a_model_that_takes_none(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")
    (project_dir / "shot.png").write_bytes(png(8, 8))
    code, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "shot.png")
    assert code == 0, err
    conv = err.split()[1]
    monkeypatch.setenv("WORKBENCH_IMAGES", "0")  # now a model that reads no images
    llm_server.script(Answer("ok"))
    code, _, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url, "thanks")
    assert code == 0, err
    earlier = llm_server.requests[-1].body["messages"][1]["content"]
    assert [p["type"] for p in earlier] == ["text", "text"]  # no image_url part
    assert earlier[1]["text"] == ("[An image (shot.png) was here; it is not sent, as this "
                                  "model does not take images.]")
    kept = latest_request(project_dir / ".workbench" / "requests", conv)
    assert kept is not None and any(note.startswith("images: each sent as a one-line note")
                                    for note in kept[1]["report"]["normalize_notes"])


@pytest.mark.parametrize(("name", "data", "why"), [
    ("tool.bin", b"\x7fELF\x02\x01\x01\x00\x00\x00", "not a text file"),
    ("paper.pdf", b"%PDF-1.7\n...", "is a PDF"),
    ("latin1.txt", "café".encode("latin-1"), "not UTF-8 text"),
])
def test_a_file_that_cannot_be_read_as_text_is_refused_with_why(capsys: pytest.CaptureFixture[str],
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer,
                                                                name: str, data: bytes,
                                                                why: str) -> None:
    (project_dir / name).write_bytes(data)
    code, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / name)
    assert code != 0 and why in err and name in err and not llm_server.requests


def test_a_file_larger_than_the_room_left_is_refused_with_both_numbers(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    (project_dir / "big.txt").write_text("word " * 20_000, encoding="utf-8")
    code, _, err = send(capsys, project_dir, llm_server, "--context-window", "8000",
                        "--attach", project_dir / "big.txt")
    assert code != 0 and not llm_server.requests
    assert "the attachments take 20,0" in err and "room for" in err and "big.txt" in err


def test_the_count_before_sending_is_the_count_of_the_request(project_dir: Path) -> None:
    store = AttachmentStore.of(project_dir / ".workbench")
    text = attach_bytes(b"print('hello')\n" * 40, "hello.py", store, COUNTER)
    image = attach_bytes(png(1600, 900), "wide.png", store, COUNTER)
    assert image_size(png(1600, 900), "png") == (1600, 900)
    assert image.tokens == image_tokens(1600, 900) == 85 + 170 * 6  # 1365x768: 3x2 tiles
    from core.attachments import user_message
    alone = COUNTER.message(user_message("look", []))
    both = COUNTER.message(user_message("look", [text, image]))
    assert both - alone == text.tokens + image.tokens


def test_export_then_import_gives_the_same_image_bytes(capsys: pytest.CaptureFixture[str],
                                                       project_dir: Path, llm_server: FakeLLMServer,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")
    image = png(64, 48, shade=200)
    (project_dir / "pic.png").write_bytes(image)
    code, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "pic.png")
    conv = err.split()[1]
    code, exported, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "openai")
    assert code == 0
    url = json.loads(exported)["messages"][0]["content"][1]["image_url"]["url"]
    assert base64.b64decode(url.split(",", 1)[1]) == image  # self-contained
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "export.json").write_text(exported, encoding="utf-8")
    code, out, err = cli(capsys, "import", other, tmp_path / "export.json")
    assert code == 0, err
    kept = list((other / ".workbench" / "attachments").iterdir())
    assert [p.read_bytes() for p in kept] == [image]
    code, again, _ = cli(capsys, "export", other, "-c", out.strip(), "--format", "openai")
    assert json.loads(again)["messages"] == json.loads(exported)["messages"]
    with Project.open(other, read_only=True) as p:
        first = p.conversations.load(out.strip()).messages[0]
    assert first.to_openai()["content"][1]["image_url"]["url"] == f"attachment:{kept[0].name}"


def test_deleting_a_conversation_takes_only_the_images_no_other_one_uses(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")
    shared, own = png(16, 16, shade=1), png(16, 16, shade=2)
    (project_dir / "shared.png").write_bytes(shared)
    (project_dir / "own.png").write_bytes(own)
    _, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "shared.png",
                     "--attach", project_dir / "own.png")
    first = err.split()[1]
    _, _, err = send(capsys, project_dir, llm_server, "--attach", project_dir / "shared.png")
    folder = project_dir / ".workbench" / "attachments"
    assert len(list(folder.iterdir())) == 2
    with Project.open(project_dir) as p:
        trashed = p.conversations.delete(first)
    assert [x.read_bytes() for x in folder.iterdir()] == [shared]  # the other one uses it
    assert [x.read_bytes() for x in (trashed / "attachments").iterdir()] == [own]  # with it


def test_a_title_is_made_from_what_was_typed_not_the_files(project_dir: Path) -> None:
    from core.attachments import user_message
    from core.titles import opening_title, typed

    store = AttachmentStore.of(project_dir / ".workbench")
    notes = attach_bytes(b"# Notes\n", "notes.md", store, COUNTER)
    message = user_message("what is this?", [notes])
    assert typed(message) == "what is this?"
    assert "Attached" not in opening_title(typed(message))

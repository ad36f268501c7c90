"""A stdio MCP server's process and its streams: ours, in place of the SDK's `stdio_client`.

The SDK's client logs a traceback for each line of the server's output that is not a JSON-RPC
message, reads a long message by joining its pieces again and again (a 50 MB result took
minutes and a gigabyte), and hands the server's stderr to a file as is. Here:

- a line that is not a JSON-RPC message ends the connection with one sentence, "it does not
  speak MCP", and no traceback;
- a message is read in one buffer and stops at MAX_MESSAGE (run_shell's 256 MB stop);
- the server's stderr goes to its log (`.workbench/mcp-logs/<name>.log`) line by line, each line
  redacted (`core.redact`: the server's `env` values included), so a server that prints its
  environment leaves no key there.

What went wrong is kept in `Said`, for the server's state and for the model.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from core.redact import redact, redact_bytes
from core.tools.shell import MAX_OUTPUT_BYTES

MAX_MESSAGE = MAX_OUTPUT_BYTES  # a longer message from a server stops it
EXIT_WAIT = 2.0  # seconds a server has to end after its input closed (the SDK's figure)
STDERR_DRAIN = 1.0  # seconds its last stderr lines have to reach the log once it ended


@dataclass
class Said:
    """Why the transport ended a server's connection ("" while it did not)."""

    why: str = ""


@dataclass(frozen=True)
class Launch:
    """A stdio server to start: its command line, environment (None: ours), folder."""

    command: str
    args: list[str]
    env: dict[str, str] | None
    cwd: str | None


Streams = tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]


def quiet_sdk() -> None:
    """The SDK's own log (its HTTP client's tracebacks for a server's bad message) is not
    printed: what went wrong is the server's state, said in a sentence."""
    logging.getLogger("mcp").setLevel(logging.CRITICAL)


@asynccontextmanager
async def stdio_streams(launch: Launch, log: Path | None, said: Said,
                        max_message: int = MAX_MESSAGE) -> AsyncIterator[Streams]:
    """Start the server; yields the (read, write) streams a `ClientSession` takes. Leaving
    closes its input, waits EXIT_WAIT seconds, then ends its process group."""
    from mcp.client.stdio import get_default_environment

    env = {**get_default_environment(), **(launch.env or {})}
    process = await anyio.open_process([launch.command, *launch.args], env=env,
                                       cwd=launch.cwd, start_new_session=True)
    to_session, from_server = anyio.create_memory_object_stream[Any](0)
    to_server, from_session = anyio.create_memory_object_stream[Any](0)
    logged = anyio.Event()
    async with anyio.create_task_group() as tg, process:
        tg.start_soon(_read_messages, process, to_session, said, max_message)
        tg.start_soon(_write_messages, process, from_session)
        tg.start_soon(_copy_stderr, process, log, logged)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled start still ends its process
                await _end(process)
                with anyio.move_on_after(STDERR_DRAIN):
                    await logged.wait()
                tg.cancel_scope.cancel()
                for stream in (from_server, to_server, to_session, from_session):
                    await stream.aclose()


async def _read_messages(process: anyio.abc.Process, to_session: MemoryObjectSendStream[Any],
                         said: Said, max_message: int) -> None:
    """The server's output, one JSON-RPC message a line, to the session; stops (the session
    then fails its requests: "Connection closed") at the first line that is not one, or at a
    message past `max_message` bytes."""
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCMessage

    assert process.stdout is not None
    buf = bytearray()
    async with to_session:
        try:
            async for chunk in process.stdout:
                start = len(buf)  # what was there held no line end
                buf += chunk
                while (end := buf.find(b"\n", start)) >= 0:
                    line, start = bytes(buf[:end]), 0
                    buf = buf[end + 1:]  # a new buffer: a long message's is freed at once
                    if not line.strip():
                        continue
                    try:
                        message = JSONRPCMessage.model_validate_json(line)
                    except ValueError:  # pydantic's ValidationError: not JSON-RPC
                        shown = redact(line[:120].decode("utf-8", "replace"))
                        said.why = (f"it does not speak MCP (it wrote {shown!r} where a "
                                    "JSON-RPC message belongs)")
                        return
                    del line  # parsed: its bytes are not kept while the session reads it
                    await to_session.send(SessionMessage(message))
                if len(buf) > max_message:
                    said.why = (f"it sent a message larger than {max_message // 2**20} MB, the "
                                "limit; it was stopped")
                    return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return


async def _write_messages(process: anyio.abc.Process,
                          from_session: MemoryObjectReceiveStream[Any]) -> None:
    assert process.stdin is not None
    try:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await process.stdin.send((data + "\n").encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


async def _copy_stderr(process: anyio.abc.Process, log: Path | None, logged: anyio.Event
                       ) -> None:
    """The server's stderr, redacted line by line, to `log` (no log: our stderr)."""
    assert process.stderr is not None
    rest = b""
    out = None
    if log is not None:  # never through a link a folder from elsewhere put in its place
        try:
            out = os.fdopen(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                                    0o644), "ab")
        except OSError:
            out = None

    def write(data: bytes) -> None:
        if out is not None:
            out.write(data)
            out.flush()
        else:
            sys.stderr.write(data.decode("utf-8", "replace"))

    try:
        async for chunk in process.stderr:
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > 1 << 16:  # a line without an end: written in pieces
                lines.append(rest)
                rest = b""
            if lines:
                write(b"".join(redact_bytes(line) + b"\n" for line in lines))
        if rest:
            write(redact_bytes(rest) + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass
    finally:
        if out is not None:
            out.close()
        logged.set()


async def _end(process: anyio.abc.Process) -> None:
    """Close the server's input and let it end; past EXIT_WAIT, end its process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except Exception:  # closed already
            pass
    try:
        with anyio.fail_after(EXIT_WAIT):
            await process.wait()
    except TimeoutError:
        if os.name == "posix":
            await terminate_posix_process_tree(process)
        else:
            process.kill()
    except ProcessLookupError:
        pass

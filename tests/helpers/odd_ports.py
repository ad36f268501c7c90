"""Loopback ports that are not model servers: one that answers garbage, one that never answers,
one that nothing listens on (for the search for a local server, core/llm/local_servers.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def odd_port(kind: str) -> Iterator[str]:
    """The address (`http://127.0.0.1:PORT`) of a port that `kind`: "garbage" answers bytes no
    HTTP client reads, then closes; "hang" accepts and says nothing until the test ends."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # the poll's time-out, or closed
                continue
            if kind == "garbage":
                try:
                    conn.recv(4096)
                    conn.sendall(b"\x00\x17garbage, not HTTP\xff\xfe\r\n\r\n{]")
                except OSError:
                    pass
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def closed_port() -> str:
    """The address of a loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"

"""A real loopback HTTP server that speaks the OpenAI chat-completions protocol.

litellm talks to it over HTTP exactly as it would to a provider, so every test exercises the real
client path: SSE streaming, tool-call deltas, the usage chunk, HTTP errors with their headers,
chunked bodies cut mid-way. Each test scripts the replies it wants, in order:

    server.script(Answer("Hello"), HttpError(500), ToolCalls([("call_1", "read_file", "{}")]))

Every request body is recorded in `server.requests` (with its arrival time) for assertions.
An unscripted request gets HTTP 500 "no scripted reply", so a test never passes by accident.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import llama_cpp

MODEL = "openai/test-model"  # what tests pass to litellm, with api_base=server.url


@dataclass
class Answer:
    """A streamed answer. `chunks` overrides how `text` is split (default: about 4 chars each)."""

    text: str = "Hello!"
    chunks: list[str] | None = None
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens); None: estimated
    cached: int | None = None  # prompt tokens the provider says it read from its cache
    delay: float = 0.0  # seconds between chunks
    first_delay: float = 0.0  # seconds before the first byte


@dataclass
class ToolCalls:
    """An assistant turn that calls tools: [(id, name, arguments_json), ...]."""

    calls: list[tuple[str, str, str]]
    text: str = ""
    usage: tuple[int, int] | None = None
    cached: int | None = None


@dataclass
class HttpError:
    status: int = 500
    message: str = "internal server error"
    headers: dict[str, str] = field(default_factory=dict)
    code: str | int | None = None
    type: str = "server_error"
    extra: dict[str, Any] = field(default_factory=dict)  # more of the error object (n_ctx)


@dataclass
class ContextLengthError:
    """HTTP 400 the way OpenAI refuses an overlong prompt, stating the model's limit."""

    limit: int = 8192
    requested: int = 9000


@dataclass
class Cut:
    """Stream `text` in chunks, then stop without a finish_reason.

    transport=True drops the TCP connection mid-body (the client sees an incomplete chunked
    read); transport=False ends the body politely but never sends finish_reason nor [DONE].
    """

    text: str = "Partial ans"
    transport: bool = True
    delay: float = 0.0


@dataclass
class Hang:
    """Accept the request and say nothing for `seconds` (for client time-outs)."""

    seconds: float = 30.0


Reply = Answer | ToolCalls | HttpError | ContextLengthError | Cut | Hang


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    arrived: float
    raw: bytes = b""  # the body as it came over the wire


class FakeLLMServer:
    """Attributes:
    url: the api_base to give litellm (`http://127.0.0.1:PORT/v1`).
    requests: every request received, in order.
    """

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        # Paths that answer with model information (GET, or POST for Ollama's /api/show).
        self.info: dict[str, Any] = {}
        self.probes: list[str] = []  # the paths asked for model information, in order
        self.info_delay = 0.0  # seconds before a model information route answers (a busy server)
        # The product's counting requests (their user message starts with PROBE_MARK) are
        # answered with their count, as a server answers any request, but kept apart from
        # `requests`. False: tools are left out of the count, as llama-cpp-python does with a
        # chat template that has no place for them.
        self.count_tools = True
        # Behave as llama-cpp-python's server does with `--n_ctx N`: a prompt longer than N
        # tokens (estimated as the usage is) is refused before any scripted reply is used:
        # streamed, with HTTP 200 and an empty body; not streamed, with the standard 400
        # naming N (a counting request too: how count_window learns N).
        self.n_ctx: int | None = None
        self.stream_usage = True  # False: no usage chunk in streams, as llama.cpp's server
        # True: a streamed request with tools gets an empty 200 (llama-cpp-python: "Automatic
        # streaming tool choice is not supported"); the same request not streamed is answered.
        self.no_streamed_tools = False
        # How a streamed request is refused (tools not streamed, a prompt over n_ctx): "empty"
        # (HTTP 200, no body), "hang-up" (the connection closed with nothing sent), "reset"
        # (closed with a TCP reset) or "dead-keep-alive" (HTTP 200, no body, the connection
        # kept open but its next request dropped unread): llama-cpp-python's server raises
        # inside its event stream, and which its client sees is a race (all seen on 0.3.36).
        self.streamed_refusal = "empty"
        # True: behave as llama-cpp-python's server with `--chat_format
        # chatml-function-calling` (see tests/helpers/llama_cpp.py): tools unseen without a
        # tool_choice, HTTP 500 on a tool-call message without content "", a new request ends
        # a running stream; with no usage in streams and no streamed tools (set with it).
        self.llama_cpp_python = False
        self.cut_streams = 0  # streams a later request ended (llama_cpp_python)
        self._running: set[threading.Event] = set()  # the streams under way
        self.first_request = threading.Event()
        self.left = threading.Event()  # a client went away mid-answer (a stopped stream)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        # A short poll: shutdown() waits for it, once per test that uses the server.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next(self) -> Reply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # http.server's naming
            """Model information endpoints (`server.info[path] = {...}`), else 404."""
            self._info()

        def _info(self) -> None:
            server.probes.append(self.path.split("?")[0])
            if server.info_delay:
                time.sleep(server.info_delay)
            info = server.info.get(self.path.split("?")[0])
            payload = json.dumps(info if info is not None else {"error": "not found"}).encode()
            try:
                self.send_response(200 if info is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # a late answer: the client stopped waiting
                pass

        dead = False  # this connection was left open yet dead ("dead-keep-alive")

        def do_POST(self) -> None:  # http.server's naming
            if self.dead:  # its next request dropped unread, as llama-cpp-python drops it
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.close_connection = True
                return
            if self.path.endswith("/v1/messages"):  # Anthropic's protocol (a Claude model)
                self._anthropic()
                return
            if self.path.endswith("/chat/completions") and not self.path.startswith("/v1/"):
                # as llama-cpp-python's server (FastAPI) answers a base URL without /v1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._error(HttpError(404, "Not Found"))
                return
            if not self.path.endswith("/chat/completions"):  # e.g. Ollama's POST /api/show
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._info()
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            wire = body  # as it came (what the server reads may leave the tools out)
            if server.llama_cpp_python:
                refusal, body = llama_cpp.received(server, body)
                if refusal is not None:
                    self.close_connection = True
                    self._error(refusal)
                    return
            if _is_count(body):
                server.probes.append(_count_kind(body))
                counted = body if server.count_tools else {**body, "tools": None}
                if not self._over_n_ctx(counted):  # as any request, refused over n_ctx
                    self.close_connection = True
                    self._complete(counted, Answer("x"))
                return
            server.requests.append(
                RecordedRequest(self.path, wire, {k.lower(): v for k, v in self.headers.items()},
                                time.time(), raw)
            )
            server.first_request.set()
            if self._over_n_ctx(body):
                return
            if server.no_streamed_tools and body.get("stream") and body.get("tools"):
                self.close_connection = True
                self._refuse_streamed()
                return
            reply = server._next()
            self.close_connection = True
            if reply is None:
                self._error(HttpError(500, "no scripted reply for this request"))
            elif isinstance(reply, HttpError):
                self._error(reply)
            elif isinstance(reply, ContextLengthError):
                self._error(
                    HttpError(
                        400,
                        f"This model's maximum context length is {reply.limit} tokens. However, "
                        f"your messages resulted in {reply.requested} tokens. Please reduce the "
                        "length of the messages.",
                        code="context_length_exceeded",
                        type="invalid_request_error",
                    )
                )
            elif isinstance(reply, Hang):
                time.sleep(reply.seconds)
            elif not body.get("stream"):
                self._complete(body, reply)
            else:
                self._stream(body, reply)

        def _over_n_ctx(self, body: dict[str, Any]) -> bool:
            """A prompt over `server.n_ctx` refused (True), before it is read, as
            llama-cpp-python's server refuses it: streamed, an empty 200; not streamed, the
            standard 400 naming its window."""
            prompt = _usage(body, "", None)["prompt_tokens"]
            asked = prompt + int(body.get("max_tokens") or 0)
            if server.n_ctx is None or asked <= server.n_ctx:
                return False
            self.close_connection = True
            if body.get("stream"):
                self._refuse_streamed()
            else:
                self._error(HttpError(
                    400, f"This model's maximum context length is {server.n_ctx} tokens. "
                    f"However, you requested {asked} tokens ({prompt} in the messages, "
                    f"{body.get('max_tokens') or 0} in the completion). Please reduce the "
                    "length of the messages or completion.",
                    code="context_length_exceeded", type="invalid_request_error"))
            return True

        # --- replies ---------------------------------------------------------------------------

        def _anthropic(self) -> None:
            """An answer in Anthropic's streaming protocol (enough for litellm's Claude path:
            text, then usage with the cache figures Anthropic reports)."""
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            server.requests.append(RecordedRequest(
                self.path, body, {k.lower(): v for k, v in self.headers.items()}, time.time()))
            reply = server._next()
            if not isinstance(reply, Answer):
                self._error(HttpError(500, "no scripted Anthropic answer"))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            prompt, completion = reply.usage or (100, max(1, len(reply.text) // 4))
            usage = {"input_tokens": prompt, "output_tokens": 1,
                     "cache_read_input_tokens": reply.cached or 0,
                     "cache_creation_input_tokens": 0}
            events: list[tuple[str, dict[str, Any]]] = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                    "model": body.get("model", "claude"), "stop_reason": None,
                    "stop_sequence": None, "usage": usage}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}})]
            events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": part}})
                       for part in _split(reply.text)]
            events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                       ("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": "end_turn",
                                                    "stop_sequence": None},
                                          "usage": {"output_tokens": completion}}),
                       ("message_stop", {"type": "message_stop"})]
            for name, data in events:
                payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self._end()

        def _refuse_streamed(self) -> None:
            """A streamed request refused as `server.streamed_refusal` says."""
            if server.streamed_refusal == "empty":
                self._empty()
            elif server.streamed_refusal == "dead-keep-alive":  # kept, unless asked to close
                self.close_connection = self.headers.get("Connection", "").lower() == "close"
                self.dead = not self.close_connection
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif server.streamed_refusal == "reset":  # RST: "connection reset by peer"
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            # "hang-up": closed with nothing sent ("server disconnected without a response")

        def _empty(self) -> None:
            """HTTP 200, an event stream's headers and nothing else (llama.cpp's refusal)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()

        def _error(self, err: HttpError) -> None:
            payload = json.dumps(
                {"error": {"message": err.message, "type": err.type, "param": None,
                           "code": err.code, **err.extra}}
            ).encode()
            self.send_response(err.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            for k, v in err.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _complete(self, body: dict[str, Any], reply: Reply) -> None:
            message: dict[str, Any] = {"role": "assistant", "content": None}
            finish = "stop"
            if isinstance(reply, Answer) and reply.first_delay:
                time.sleep(reply.first_delay)  # the whole answer is generated first
            if isinstance(reply, Answer):
                message["content"], finish = reply.text, reply.finish_reason
            elif isinstance(reply, ToolCalls):
                message["content"] = reply.text or None
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in reply.calls
                ]
                finish = "tool_calls"
            payload = json.dumps({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": _usage(body, str(message.get("content") or ""), None),
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            ended = threading.Event()  # a later request ended this stream (llama_cpp_python)
            with server._lock:
                server._running.add(ended)
            try:
                self._streamed(body, reply, ended)
            finally:
                with server._lock:
                    server._running.discard(ended)

        def _streamed(self, body: dict[str, Any], reply: Reply, ended: threading.Event) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            model = body.get("model", "test-model")
            want_usage = bool((body.get("stream_options") or {}).get("include_usage")) \
                and server.stream_usage
            try:
                if isinstance(reply, Answer):
                    if reply.first_delay:
                        time.sleep(reply.first_delay)
                    parts = reply.chunks if reply.chunks is not None else _split(reply.text)
                    if not self._text(model, parts, reply.delay, ended):
                        return
                    self._event(_chunk(model, {}, reply.finish_reason))
                    if want_usage:
                        self._event(_usage_chunk(model, _usage(body, reply.text, reply.usage,
                                                                   reply.cached)))
                    self._event("[DONE]")
                    self._end()
                elif isinstance(reply, ToolCalls):
                    self._event(_chunk(model, {"role": "assistant", "content": reply.text or ""}))
                    for idx, (call_id, name, args) in enumerate(reply.calls):
                        self._event(_chunk(model, {"tool_calls": [{
                            "index": idx, "id": call_id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}))
                        for piece in _split(args, 7):
                            self._event(_chunk(model, {"tool_calls": [{
                                "index": idx, "function": {"arguments": piece}}]}))
                    self._event(_chunk(model, {}, "tool_calls"))
                    if want_usage:
                        self._event(_usage_chunk(model, _usage(body, reply.text, reply.usage,
                                                                   reply.cached)))
                    self._event("[DONE]")
                    self._end()
                elif isinstance(reply, Cut):
                    self._text(model, _split(reply.text), reply.delay)
                    if reply.transport:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                    else:
                        self._end()
            except (BrokenPipeError, ConnectionResetError, OSError):
                server.left.set()  # the client went away (a stopped stream): nothing more

        def _text(self, model: str, parts: list[str], delay: float,
                  ended: threading.Event | None = None) -> bool:
            """False when a later request ended the stream (its connection dropped)."""
            for i, part in enumerate(parts):
                delta = {"content": part}
                if i == 0:
                    delta["role"] = "assistant"
                self._event(_chunk(model, delta))
                if delay:
                    time.sleep(delay)
                if ended is not None and ended.is_set():
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return False
            return True

        def _event(self, data: Any) -> None:
            text = data if isinstance(data, str) else json.dumps(data)
            payload = f"data: {text}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def _end(self) -> None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def _is_count(body: dict[str, Any]) -> bool:
    from core.context.server_window import PROBE_MARK

    messages = body.get("messages") or []
    return any(isinstance(m, dict) and str(m.get("content") or "").startswith(PROBE_MARK)
               for m in messages)


def _count_kind(body: dict[str, Any]) -> str:
    """What `server.probes` records of a counting request: "count" (a sample), "count+tools"
    (one offering a tool), "count:window" (one over the window assumed, see count_window)."""
    from core.context.server_window import WINDOW_LEAD

    first = next((m for m in body.get("messages") or [] if isinstance(m, dict)
                  and m.get("role") == "user"), {})
    if str(first.get("content") or "").startswith(WINDOW_LEAD):
        return "count:window"
    return "count" + ("+tools" if body.get("tools") else "")


def _split(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage_chunk(model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [], "usage": usage}


def _usage(body: dict[str, Any], text: str, given: tuple[int, int] | None,
           cached: int | None = None) -> dict[str, Any]:
    if given is None:
        # as a server counts a prompt: the messages and the tools it offers
        prompt = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools") or [])
        given = (max(1, len(prompt) // 4), max(1, len(text) // 4))
    usage: dict[str, Any] = {"prompt_tokens": given[0], "completion_tokens": given[1],
                             "total_tokens": given[0] + given[1]}
    if cached is not None:  # as OpenAI reports a prompt-cache hit
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


class ServerProcess:
    """The loopback server in a process of its own, for benchmarks: a real provider's work
    (serializing chunks) does not run in our process, so it must not compete with the window
    for our interpreter. Scripted once, up front: `ServerProcess(Answer(...), ...)`."""

    def __init__(self, *replies: Reply) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, list(replies)), daemon=True)
        self._proc.start()
        self.url: str = self._parent.recv()

    def close(self) -> None:
        self._parent.send("stop")
        self._proc.join(10)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(conn: Any, replies: list[Reply]) -> None:
    with FakeLLMServer() as server:
        server.script(*replies)
        conn.send(server.url)
        conn.recv()  # until told to stop


def summary_text(lead: str) -> str:
    """A summary as the summarizer is asked to write it (its seven sections), led by `lead`
    (a marker a test looks for)."""
    return (f"## User intent\n{lead}\n## Progress\nThe parsers were reviewed.\n"
            "## Decisions and findings\nKeep line numbers.\n## Errors and resolutions\nNone.\n"
            "## Current state\nReviewed.\n## Files\npkg/mod_0.py\n## Next steps\nNone.")

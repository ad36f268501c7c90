"""Asking a local or OpenAI-compatible server how long a context its model takes.

litellm's map knows hosted models; a model served by vLLM, llama.cpp, LM Studio or Ollama is
unknown to it, yet the server says its context length. It is asked once per (address, model)
and remembered for the process (and, by the project's context, across runs: a CLI command
asks nothing a previous one learnt); a server that answers without saying is remembered as
not saying, so nothing is asked twice. A server that does not answer at all (down, or busy
past a second) has said nothing yet: it is asked again after RETRY_S, and by the next
command. A failed request to it makes it asked again.

    vLLM, and servers copying it   GET  <base>/models            data[].max_model_len
    LM Studio                      GET  <root>/api/v0/models/<m>  loaded_context_length
    llama.cpp                      GET  <root>/props              default_generation_settings.n_ctx
    Ollama                         POST <root>/api/show {model}   num_ctx, else *.context_length

A server that states none of these (llama-cpp-python) is asked once to count a prompt just over
the window a build would assume (`count_window`): a server whose window is smaller refuses it
before reading it, naming its window.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from core.context.budget import DEFAULT_WINDOW
from core.llm import compat
from core.llm.translate import stated_window

TIMEOUT_S = 1.0
RETRY_S = 60.0  # a server that did not answer is asked again after this long
COUNT_TIMEOUT_S = 20.0  # a count asks for one output token: a CPU server still reads the prompt
PROBE_MARK = "[workbench: counting tokens]"  # leads the counting request's user message
# What a counting request offers as tools: small, so a large local model reads it quickly.
PROBE_TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Read a text file of the project and return its lines "
    "with their numbers, from an offset, up to a limit.",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string", "description": "the file, relative to the project"},
        "offset": {"type": "integer", "description": "the first line to return"},
        "limit": {"type": "integer", "description": "how many lines to return"}},
        "required": ["path"]}}}
# The window count (see count_window): one word a token in every tokenizer we know ("the"
# after a space), as many as the window a build assumes. Cheap to build (32 KB) and to
# refuse: a server refuses it before reading it; what it does not refuse it reads, which on
# a CPU takes minutes (the figures: make real-llm).
WINDOW_LEAD = f"{PROBE_MARK} window:"
WINDOW_WORDS = DEFAULT_WINDOW
WINDOW_TIMEOUT_S = 5.0  # a refusal comes before the prompt is read: a server reading it took it
_lock = threading.Lock()
_known: dict[tuple[str, str], int | None] = {}
_unanswered: dict[tuple[str, str], float] = {}  # when a server last did not answer at all


def _key(api_base: str, model: str) -> tuple[str, str]:
    return api_base.rstrip("/"), model


def cached_window(api_base: str | None, model: str) -> int | None:
    """What the server said before (no network): for builds on the window's thread."""
    if not api_base:
        return None
    with _lock:
        return _known.get(_key(api_base, model))


def server_window(api_base: str | None, model: str) -> int | None:
    """The context length the server at `api_base` states for `model` (asked once)."""
    if not api_base:
        return None
    key = _key(api_base, model)
    with _lock:
        if key in _known:
            return _known[key]
        if time.monotonic() - _unanswered.get(key, -RETRY_S) < RETRY_S:
            return None
    answered, found = _ask(key[0], model)
    with _lock:
        if answered:
            _known[key] = found
            _unanswered.pop(key, None)
        else:
            _unanswered[key] = time.monotonic()
    return found


def unanswered(api_base: str | None, model: str) -> bool:
    """Whether the server at `api_base` left a route unanswered when last asked (so what it
    would say is not known yet: nothing to remember across runs)."""
    if not api_base:
        return False
    with _lock:
        return _key(api_base, model) in _unanswered


def count_prompt(api_base: str, model: str, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> int | None:
    """The server's own count of a prompt: `messages` (and `tools`) sent unstreamed for one
    output token, its `usage.prompt_tokens` read. None when it does not say."""
    name = model.split("/", 1)[1] if "/" in model else model
    body: dict[str, Any] = {"model": name, "messages": messages, "max_tokens": 1,
                            "stream": False}
    if tools:
        body["tools"] = tools
        if compat.profile(api_base, model).tool_choice:
            body["tool_choice"] = "auto"  # as a request of the conversation offers them
    # behind the server's running answer, never cutting it (see core.llm.compat)
    with compat.one_at_a_time_sync(api_base, model, COUNT_TIMEOUT_S) as turn:
        if not turn:
            return None
        try:
            data = _post(f"{api_base.rstrip('/')}/chat/completions", body, COUNT_TIMEOUT_S)
            value = (data.get("usage") or {}).get("prompt_tokens")
            return int(value) if value else None
        except (OSError, ValueError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class WindowCount:
    """What a server made of a count of WINDOW_WORDS words: refused, naming its `window`, or
    took it (`took`: the prompt tokens it counted; its window is larger); neither when it
    refused without naming one, or did not answer within WINDOW_TIMEOUT_S."""

    window: int | None = None
    took: int | None = None


def count_window(api_base: str, model: str) -> WindowCount | None:
    """A server that states no window, asked to count (unstreamed, one token out) a prompt just
    over the window a build would assume: one smaller refuses it before reading it, and its
    refusal names its window, read as a refused turn's is (core.llm.translate). Behind the
    server's running answer (core.llm.compat), never cutting it. None when the server was not
    reached or its turn did not come: nothing was learned, ask again later."""
    name = model.split("/", 1)[1] if "/" in model else model
    text = f"{WINDOW_LEAD} " + "the " * WINDOW_WORDS
    body = {"model": name, "messages": [{"role": "user", "content": text}], "max_tokens": 1,
            "stream": False}
    with compat.one_at_a_time_sync(api_base, model, COUNT_TIMEOUT_S) as turn:
        if not turn:
            return None
        try:
            data = _post(f"{api_base.rstrip('/')}/chat/completions", body, WINDOW_TIMEOUT_S)
        except urllib.error.HTTPError as e:  # refused: as too long, naming its window?
            return WindowCount(window=_refused_window(e))
        except TimeoutError:  # reached, no refusal in time: reading it (or another's first)
            return WindowCount()
        except OSError:  # refused the connection, unreachable, cut: not asked
            return None
        except (ValueError, TypeError, AttributeError):  # an answer we cannot read
            return WindowCount()
    try:
        took = int((data.get("usage") or {}).get("prompt_tokens") or 0)
    except (TypeError, ValueError):
        took = 0
    # a server that cut the prompt to fit (and counts what it kept) took less than was sent
    return WindowCount(took=took if took >= WINDOW_WORDS else None)


def _refused_window(e: urllib.error.HTTPError) -> int | None:
    try:
        text = e.read(100_000).decode("utf-8", "replace")
    except OSError:
        return None
    try:
        error = json.loads(text).get("error")
        code = error.get("code") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        code = None
    return stated_window(code, text)


def forget(api_base: str | None, model: str) -> None:
    """Ask the server at `api_base` again next time (a request to it failed)."""
    if api_base:
        with _lock:
            _known.pop(_key(api_base, model), None)
            _unanswered.pop(_key(api_base, model), None)


def forget_all() -> None:
    """Ask again next time (a server was reconfigured; also for tests)."""
    with _lock:
        _known.clear()
        _unanswered.clear()


def _ask(base: str, model: str) -> tuple[bool, int | None]:
    """(whether the server answered every route it was asked, the window it stated or None).
    A route it did not answer may be the one that would have said."""
    name = model.split("/", 1)[1] if "/" in model else model
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    answered = True
    for ask in (_vllm, _lm_studio, _llama_cpp, _ollama):
        try:
            value = ask(base, root, name)
        except urllib.error.HTTPError:  # an answer: not this route
            value = None
        except OSError:  # refused, unreachable, or no answer within TIMEOUT_S
            value, answered = None, False
        except (ValueError, KeyError, TypeError, AttributeError):  # an answer we cannot read
            value = None
        if value:
            return True, value
    return answered, None


def _vllm(base: str, root: str, name: str) -> int | None:
    data = _get(f"{base}/models")
    for entry in data.get("data") or []:
        if isinstance(entry, dict) and entry.get("id") == name and entry.get("max_model_len"):
            return int(entry["max_model_len"])
    return None


def _lm_studio(base: str, root: str, name: str) -> int | None:
    data = _get(f"{root}/api/v0/models/{name}")
    value = data.get("loaded_context_length") or data.get("max_context_length")
    return int(value) if value else None


def _llama_cpp(base: str, root: str, name: str) -> int | None:
    data = _get(f"{root}/props")
    n_ctx = (data.get("default_generation_settings") or {}).get("n_ctx")
    return int(n_ctx) if n_ctx else None


def _ollama(base: str, root: str, name: str) -> int | None:
    data = _post(f"{root}/api/show", {"model": name})
    for line in str(data.get("parameters") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx":
            return int(parts[1])
    info = data.get("model_info") or {}
    lengths = [int(v) for k, v in info.items() if k.endswith(".context_length")]
    return max(lengths) if lengths else None


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # user's server
        data = json.loads(response.read(1_000_000))
    return data if isinstance(data, dict) else {}


def _post(url: str, body: dict[str, Any], timeout: float = TIMEOUT_S) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer sk-no-key-needed"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = json.loads(response.read(1_000_000))
    return data if isinstance(data, dict) else {}

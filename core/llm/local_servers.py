"""Finding a model server already running on this machine (for a first start without a key).

Each address is asked two questions at once, and every address in parallel, all within one
deadline: a closed port refuses at once, a port that hangs or answers something else than a
model server is simply not one. Loopback only: nothing leaves the machine.

    Ollama                                  GET <address>/api/tags    models[].name
    LM Studio, llama.cpp, llama-cpp-python,
    vLLM, any OpenAI-compatible server      GET <address>/v1/models   data[].id

Every server found is offered as an OpenAI-compatible one (Ollama serves that API too, at
`/v1`): the model is `openai/<id>` and the base URL `<address>/v1`, no key.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx

# The ports the usual local servers listen on by default: Ollama, LM Studio, llama.cpp's
# server (and llama-cpp-python's), vLLM (and llama-cpp-python's own default).
LOCAL_ADDRESSES = ("http://127.0.0.1:11434", "http://127.0.0.1:1234", "http://127.0.0.1:8080",
                   "http://127.0.0.1:8000")
DEADLINE_S = 2.0  # for the whole search: a server that has not answered by then is not offered
MAX_BODY = 1_000_000  # bytes read of an answer: a model list is a few kilobytes
# What `owned_by` says of the server behind /v1/models (each fills it in its own way).
OWNERS = {"vllm": "vLLM", "llamacpp": "llama.cpp", "me": "llama-cpp-python",
          "organization_owner": "LM Studio", "library": "Ollama"}
COMPATIBLE = "OpenAI-compatible server"


@dataclass(frozen=True)
class LocalServer:
    """A model server found on this machine.

    Attributes:
        kind: what it is, as far as its answer tells ("Ollama", "vLLM", …, or COMPATIBLE).
        address: where it was found (`http://127.0.0.1:11434`).
        models: the models it serves, as it names them.
    """

    kind: str
    address: str
    models: tuple[str, ...]

    @property
    def api_base(self) -> str:
        """The base URL requests go to: its OpenAI-compatible API."""
        return f"{self.address}/v1"

    @staticmethod
    def model_setting(name: str) -> str:
        """A model of its as the settings name it (`openai/`: sent as an OpenAI-compatible
        server's, the prefix taken off)."""
        return f"openai/{name}"


def is_loopback(address: str) -> bool:
    host = urlsplit(address).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def find_local_servers(addresses: Sequence[str] = LOCAL_ADDRESSES,
                             deadline_s: float | None = None) -> list[LocalServer]:
    """The servers answering at `addresses` (loopback ones only; others are not asked), in
    the order given, within `deadline_s` (DEADLINE_S) for them all."""
    import httpx  # (the openai SDK's own client: installed with it)

    wanted = [a.rstrip("/") for a in addresses if is_loopback(a)]
    if not wanted:
        return []
    deadline = DEADLINE_S if deadline_s is None else deadline_s
    # trust_env=False: a proxy set in the environment is never asked to reach 127.0.0.1
    async with httpx.AsyncClient(timeout=deadline, trust_env=False,
                                 follow_redirects=False) as client:
        tasks = [asyncio.ensure_future(_ask(client, a)) for a in wanted]
        done, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    found = [t.result() for t in tasks if t in done and t.exception() is None]
    return [server for server in found if server is not None]


async def _ask(client: httpx.AsyncClient, address: str) -> LocalServer | None:
    """What answers at `address`: Ollama's own list first (it says the server is Ollama),
    else an OpenAI-compatible list; None when neither is a model list."""
    tags, models = await asyncio.gather(_get(client, f"{address}/api/tags"),
                                        _get(client, f"{address}/v1/models"))
    if isinstance(tags, dict) and isinstance(tags.get("models"), list):
        names = [m.get("name") or m.get("model") for m in tags["models"] if isinstance(m, dict)]
        return LocalServer("Ollama", address, _names(names))
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        entries = [m for m in models["data"] if isinstance(m, dict)]
        owners = {str(m.get("owned_by")) for m in entries}
        kind = next((OWNERS[o] for o in sorted(owners) if o in OWNERS), COMPATIBLE)
        return LocalServer(kind, address, _names([m.get("id") for m in entries]))
    return None


def _names(values: list[Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if isinstance(v, str) and v.strip()))


async def _get(client: httpx.AsyncClient, url: str) -> Any:
    """The JSON at `url`, or None: refused, an error status, not JSON, or too long."""
    import httpx

    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                return None
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    return None
        return json.loads(body)
    except (httpx.HTTPError, OSError, ValueError):
        return None

"""Loading litellm: lazily, offline, quietly; and warming whichever transport a model takes.

litellm takes seconds to import, so nothing imports it at module level: `load_litellm()` does, once,
and `start_background_import()` lets a front end warm it up on a thread while it shows a window or
parses arguments. Before the import we point it at its bundled model map and tiktoken at the BPE
files that ship inside litellm's package, so no run-time step needs the internet.

A model that speaks the OpenAI protocol goes through the openai SDK instead (a fraction of a
second to import): `ready_for(model)` says so, and `start_background_import(model=...)` warms the
SDK for it rather than litellm.
"""

from __future__ import annotations

import threading

from core.llm import litellm_loader
from core.llm.litellm_loader import is_loaded as is_loaded
from core.llm.litellm_loader import load_litellm as load_litellm
from core.llm.tokens import encoding_for_model, get_encoding

_lock = threading.Lock()
_threads: dict[str, threading.Thread] = {}  # "litellm", "sdk": each warmed once


def start_background_import(warm_up: bool = False, model: str | None = None
                            ) -> threading.Thread:
    """Begin importing litellm on a daemon thread; `load_litellm()` then waits for it. For a
    `model` that speaks the OpenAI protocol, the openai SDK is warmed instead (litellm is not
    needed for it).

    With `warm_up`, also do the one-time work of a first request (litellm imports a few hundred
    more modules inside its first call) and load the tokenizers (on the SDK's path the model's
    alone), so that a window's first Send does not stall the event loop. A command-line run
    gains nothing from it on litellm's path and skips it there (the SDK's warm-up is the same
    for both).
    """
    from core.llm.model_map import speaks_openai

    sdk = model if model is not None and speaks_openai(model) else None
    with _lock:
        which = "sdk" if sdk else "litellm"
        thread = _threads.get(which)
        if thread is None:
            if sdk:
                thread = threading.Thread(target=_warm_sdk, args=(sdk,), name="sdk-import",
                                          daemon=True)
            else:
                thread = threading.Thread(target=_load_and_warm if warm_up else load_litellm,
                                          name="litellm-import", daemon=True)
            _threads[which] = thread
            thread.start()
        return thread


def ready_for(model: str) -> bool:
    """Whether a request to `model` can leave without waiting for litellm's import: it speaks
    the OpenAI protocol (the SDK's path), or litellm is in."""
    from core.llm.model_map import speaks_openai

    return litellm_loader.is_loaded() or speaks_openai(model)


def _warm_sdk(model: str) -> None:
    """The SDK's path made ready for `model`: the SDK and its first request's one-time work (a
    request refused at once on loopback's discard port; nothing leaves the machine), then the
    model's tokenizer. Only the model's: loading another holds the interpreter (every thread,
    the window's and a first request's too) for as long again, and whoever needs it loads it."""
    try:
        import asyncio

        from core.llm.events import LLMRequest
        from core.llm.via_openai import OpenAITransport

        async def first_call() -> None:
            request = LLMRequest(model="openai/warm-up", api_base="http://127.0.0.1:9/v1",
                                 api_key="warm-up", timeout=2,
                                 messages=[{"role": "user", "content": "."}])
            async for _ in OpenAITransport().stream(request):
                pass

        asyncio.run(first_call())
    except Exception:  # the refusal is the expected outcome
        pass
    try:
        get_encoding(encoding_for_model(model))
    except Exception:  # counting will load it later and report then
        pass


def _load_tokenizers() -> None:
    # The window's meter counts with them (half a second): before the library.
    try:
        get_encoding("o200k_base")
        get_encoding("cl100k_base")
    except Exception:  # counting will load it later and report then
        pass


def _load_and_warm() -> None:
    _load_tokenizers()  # first: the meter needs them, not litellm (whose import takes seconds)
    litellm = load_litellm()
    try:
        # litellm prices each answer by counting its tokens with a tokenizer of its own (a
        # third of a second to load, on the engine's thread, mid-turn, the first time)
        litellm.token_counter(model="openai/warm-up", text=".")
    except Exception:
        pass
    try:
        import asyncio

        async def first_call() -> None:
            # Port 9 on loopback (discard) refuses at once; nothing leaves the machine. Its
            # distinct api_base keeps the client it creates out of the real calls' cache.
            await litellm.acompletion(
                model="openai/warm-up", api_base="http://127.0.0.1:9/v1", api_key="warm-up",
                messages=[{"role": "user", "content": "."}], stream=True,
                num_retries=0, max_retries=0, timeout=2,
            )

        asyncio.run(first_call())
    except Exception:  # the refusal is the expected outcome
        pass

"""Which provider serves a model, which path its requests take, and which key and address
they carry: decided without importing litellm wherever the model speaks the OpenAI protocol.

Two transports stand behind `LLMClient`: the openai SDK for models that speak the OpenAI
protocol (`openai/...`, a bare OpenAI model name, and so every OpenAI-compatible server given
as `openai/<model>` with an api_base), and litellm for the providers whose protocol it
translates (Anthropic, Gemini, Bedrock, Vertex, Ollama's own API, ...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.llm.errors import MissingApiKey, UnknownModel
from core.llm.events import LLMRequest
from core.llm.model_map import speaks_openai
from core.settings import KEYLESS_PROVIDERS, key_env_var, key_for_request, keyring_works

# The providers' own addresses: a base URL pointing there may carry the provider's own key. A
# name starting with "." is a domain: Azure has no single address, each user's resource is a
# host under these (AZURE_API_BASE is where AZURE_API_KEY belongs).
OWN_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
    "azure": (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"),
    "azure_ai": (".services.ai.azure.com", ".inference.ai.azure.com", ".models.ai.azure.com"),
}

# Providers that read another provider's variables (litellm and the OpenAI SDK behind it).
ENV_PREFIXES = {"text-completion-openai": "OPENAI", "azure_text": "AZURE", "ollama_chat": "OLLAMA"}
ENV_PREFIX_OWNER = {"OPENAI": "openai", "AZURE": "azure"}


def detect_provider(model: str, api_base: str | None = None) -> str:
    """litellm's provider name for a model string ("openai" for the SDK's models, without
    importing litellm).

    Raises:
        UnknownModel: litellm cannot tell which provider serves the model.
    """
    if speaks_openai(model):
        return "openai"
    from core.llm.litellm_loader import load_litellm

    litellm = load_litellm()
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception as e:  # litellm raises BadRequestError here
        raise UnknownModel(
            f"Unknown model {model!r}: litellm cannot tell which provider serves it. Use a "
            "provider prefix such as 'openai/', 'anthropic/' or 'ollama/' (see Settings).",
            details=str(e),
        ) from e


def needs_cache_breakpoints(model: str) -> bool:
    """Whether `model` caches a prompt's prefix only where the request marks it: Anthropic's
    Claude models, directly or through Bedrock, Vertex AI or Azure AI (litellm names the
    provider). OpenAI, DeepSeek and local servers cache by themselves: no marks for them."""
    if "claude" not in model.lower() or speaks_openai(model):
        return False
    try:
        return detect_provider(model) in ("anthropic", "bedrock", "vertex_ai", "azure_ai")
    except UnknownModel:  # optional: a model litellm cannot route gets no marks
        return False


@dataclass(frozen=True)
class Destination:
    """Where a request goes and with which key."""

    provider: str
    api_base: str | None
    api_key: str


def destination(request: LLMRequest) -> Destination:
    """The provider, address and key of `request`.

    Raises:
        UnknownModel: no provider serves the model.
        MissingApiKey: a hosted provider without a key.
    """
    provider = detect_provider(request.model, request.api_base)
    # litellm and the SDK would send the provider's key to OPENAI_BASE_URL and friends: such an
    # address is a custom base URL like any other and gets only a key meant for it.
    api_base = request.api_base or environment_base_url(provider)
    api_key = request.api_key or key_for_request(provider, api_base, request.key_name)
    if not api_key:
        if api_base or provider in KEYLESS_PROVIDERS:
            api_key = "sk-no-key-needed"  # local servers ignore it; the SDK insists on one
        else:
            raise MissingApiKey(
                f"No API key for {provider}. Set {key_env_var(provider)} in the environment"
                + (" or save a key in Settings." if keyring_works() else
                   " before starting Context Workbench (no system keyring works here, so a "
                   "key cannot be saved in Settings)."),
                details=f"provider={provider}",
            )
    return Destination(provider, api_base, api_key)


def environment_base_url(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """A base URL for `provider` that litellm would take from the environment, unless it is the
    provider's own address (where its own key belongs)."""
    env = os.environ if env is None else env
    prefix = ENV_PREFIXES.get(provider, provider.upper().replace("-", "_"))
    for name in (f"{prefix}_BASE_URL", f"{prefix}_API_BASE"):
        value = (env.get(name) or "").strip()
        if value and not is_own_address(ENV_PREFIX_OWNER.get(prefix, provider), value):
            return value
    return None


def is_own_address(provider: str, url: str) -> bool:
    """Whether `url` is one of `provider`'s own addresses (where its own key belongs)."""
    host = (urlsplit(url).hostname or "").lower()
    return any(host.endswith(own) if own.startswith(".") else host == own
               for own in OWN_HOSTS.get(provider, ()))

"""Keeping secrets out of everything we persist or print.

A provider's error text may echo the key it was given ("Incorrect API key provided: sk-…"), and a
traceback may hold a header. Before such text reaches the log, an export, a saved request or the
terminal, key-shaped strings and the keys actually in use are replaced by a marker that keeps
only a hint of which key it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MARK = "[redacted]"
# Environment variables whose values are secrets: never passed to a command the model wrote,
# and never written anywhere if a tool's output (or anyone's text) quotes them.
SECRET_NAME = re.compile(r"(API_KEY|APIKEY|SECRET|TOKEN|PASSWORD)", re.IGNORECASE)
MIN_ENV_SECRET = 12  # shorter values of such variables are flags and names, not secrets

# Shapes of real provider keys and tokens. Deliberately specific: a redaction must not eat an
# ordinary word of an error message.
_PATTERNS = [
    r"sk-(?:ant-|proj-|or-v1-|svcacct-)?[A-Za-z0-9_\-*]{8,}",  # OpenAI, Anthropic, OpenRouter
    r"AIza[0-9A-Za-z_\-]{20,}",  # Google
    r"gsk_[A-Za-z0-9]{20,}",  # Groq
    r"xai-[A-Za-z0-9]{20,}",  # xAI
    r"hf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"(?<=[Bb]earer )[A-Za-z0-9._~+/\-]{12,}=*",  # Authorization: Bearer <token>
    r"(?<=[Aa][Pp][Ii][-_][Kk][Ee][Yy]=)[A-Za-z0-9._\-]{12,}",  # api_key=... in a URL or dump
    # whatever a provider echoes back as "the key"
    r"(?<=(?<![A-Za-z])[Kk]ey provided: )[^\s.,;]{6,}",
]
_KEYISH = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
# A long hex or base64-ish token right after the word "key", "token" or "secret" (`x-api-key:
# 3f8a…`, `"api_key": "AbC1…"`, `the key 3f8a… is revoked`). It must mix letters and digits, so
# a long ordinary word after "key" is left alone.
_AFTER_KEY = re.compile(
    r"""((?<![A-Za-z])(?:key|token|secret)["']?(?:\s*[:=]\s*|\s+)["']?)"""
    r"(?=[A-Za-z0-9+/_\-.]*[0-9])(?=[A-Za-z0-9+/_\-.]*[A-Za-z])([A-Za-z0-9+/_\-.]{20,}=*)",
    re.IGNORECASE)
MIN_SECRET = 6  # a "secret" shorter than this would redact ordinary words


# What every key shape above starts with or follows, lower-cased: text without any of them holds
# no key shape, and the patterns (which start with lookbehinds, so are tried at every position:
# 0.3 ms for a 1,400-character tool output) are not run over it.
_TRIGGER_WORDS = ("sk-", "aiza", "gsk_", "xai-", "hf_", "bearer", "key", "token", "secret")
_TRIGGERS = tuple(t.encode() for t in _TRIGGER_WORDS)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with key-shaped strings and each of `secrets` replaced by a marker."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, MARK)
    folded = text.casefold()  # the patterns' case-blind letters too ("ſecret", the Kelvin K)
    if not any(t in folded for t in _TRIGGER_WORDS):
        return text
    return _AFTER_KEY.sub(lambda m: m.group(1) + MARK, _KEYISH.sub(MARK, text))


def redact_bytes(data: bytes, secrets: Iterable[str | None] = ()) -> bytes:
    """`redact` for raw output (bytes that are not UTF-8 are kept as they were). Fast where
    there is nothing to redact, as in almost all of a long command's output."""
    keys = [s.encode() for s in secrets if s and len(s) >= MIN_SECRET]
    lowered = data.lower()
    if not any(t in lowered for t in _TRIGGERS) and not any(k in data for k in keys):
        return data
    text = data.decode("utf-8", "surrogateescape")
    return redact(text, [k.decode() for k in keys]).encode("utf-8", "surrogateescape")


def find_secret(text: str, secrets: Iterable[str | None] = ()) -> str | None:
    """The first key-shaped string, or one of `secrets`, that `text` holds (what `redact`
    would replace), or None when it holds none."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET and secret in text:
            return secret
    text = text.replace(MARK, "")  # what was redacted already is no key
    found = _KEYISH.search(text) or _AFTER_KEY.search(text)
    return None if found is None else found.group(0)


def redact_optional(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    return None if text is None else redact(text, secrets)


def environment_secrets(env: Mapping[str, str]) -> set[str]:
    """The values of the environment's secret-named variables (API keys, tokens, passwords)
    that are long enough to be secrets rather than flags."""
    return {v for k, v in env.items()
            if SECRET_NAME.search(k) and len(v) >= MIN_ENV_SECRET and not any(
                c.isspace() for c in v)}

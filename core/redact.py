"""Keeping secrets out of everything we persist or print.

A provider's error text may echo the key it was given ("Incorrect API key provided: sk-…"), and a
traceback may hold a header. Before such text reaches the log, an export, a saved request or the
terminal, key-shaped strings and the keys actually in use are replaced by a marker that keeps
only a hint of which key it was.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MARK = "[redacted]"
# Environment variables whose values are secrets: never passed to a command the model wrote,
# and never written anywhere if a tool's output (or anyone's text) quotes them.
SECRET_NAME = re.compile(r"(API_KEY|APIKEY|SECRET|TOKEN|PASSWORD)", re.IGNORECASE)
MIN_ENV_SECRET = 12  # shorter values of such variables are flags and names, not secrets
_PLACE_NAME = re.compile(r"_(DIR|PATH|FILE|HOME)$", re.IGNORECASE)

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
    r"(?<=(?<![A-Za-z])[Kk]ey provided: )[^\s.,;\"'\\]{6,}",
]
# A key starts a word: "task-specific" holds "sk-specific", and is not a key.
_KEYISH = re.compile("|".join(f"(?:{p})" if p.startswith("(?<=") else f"(?<![A-Za-z0-9_])(?:{p})"
                              for p in _PATTERNS))
# A long hex or base64-ish token right after the word "key", "token" or "secret" (`x-api-key:
# 3f8a…`, `"api_key": "AbC1…"`, `the key 3f8a… is revoked`). It must mix letters and digits, so
# a long ordinary word after "key" is left alone.
_AFTER_KEY = re.compile(
    r"""((?<![A-Za-z])(?:key|token|secret)["']?(?:\s*[:=]\s*|\s+)["']?)"""
    r"(?=[A-Za-z0-9+/_\-.]*[0-9])(?=[A-Za-z0-9+/_\-.]*[A-Za-z])([A-Za-z0-9+/_\-.]{20,}=*)",
    re.IGNORECASE)
MIN_SECRET = 6  # a "secret" shorter than this would redact ordinary words
# A known key shorter than MIN_SECRET (an MCP server's `MCP_TOKEN=abc12`) is replaced where it
# stands as a word of its own, never inside another word; shorter than this, it is a flag.
MIN_KNOWN = 3
_WORD = "A-Za-z0-9_"

# The keys this process knows beyond its environment's (a keyring's key, an MCP server's `env`
# and `headers` values): every `redact` replaces them, wherever the text is going.
_known: set[str] = set()
_known_lock = threading.Lock()


# values a secret-named setting may have that are settings, not keys (`USE_TOKEN_CACHE=true`)
_FLAGS = {"true", "false", "yes", "no", "on", "off", "none", "null", "auto", "default"}


def remember(values: Iterable[str | None]) -> None:
    """Keys in use beyond the environment's: from now on, no text this process writes, sends
    or prints holds them (values shorter than MIN_KNOWN, numbers and words like "true" are
    settings, not keys)."""
    with _known_lock:
        _known.update(v for v in values if v and len(v) >= MIN_KNOWN and v.strip() == v
                      and not v.isdigit() and v.casefold() not in _FLAGS)


def forget_all() -> None:
    """Forget the keys `remember` was given (a test's keys, after the test)."""
    with _known_lock:
        _known.clear()


def known() -> list[str]:
    """Every key this process knows: the environment's secret-named values and those
    remembered."""
    with _known_lock:
        extra = list(_known)
    return [*_process_secrets(), *extra]


# (the process environment as last read, its secrets): every write redacts, and reading the
# secrets afresh decodes and matches every variable of the environment each time
_env_seen: tuple[dict[Any, Any], frozenset[str]] | None = None


def _process_secrets() -> frozenset[str]:
    """`environment_secrets(os.environ)`, read again only when the environment changed."""
    global _env_seen
    data = getattr(os.environ, "_data", None)  # what os.environ holds, undecoded
    if not isinstance(data, dict):
        return frozenset(environment_secrets(os.environ))
    seen = _env_seen
    if seen is not None and seen[0] == data:
        return seen[1]
    snapshot = dict(data)  # taken first: a change while reading makes the next call read again
    secrets = frozenset(environment_secrets(os.environ))
    _env_seen = (snapshot, secrets)
    return secrets


# What every key shape above starts with or follows, lower-cased: text without any of them holds
# no key shape, and the patterns (which start with lookbehinds, so are tried at every position,
# dear over every tool output) are not run over it.
_TRIGGER_WORDS = ("sk-", "aiza", "gsk_", "xai-", "hf_", "bearer", "key", "token", "secret")
_TRIGGERS = tuple(t.encode() for t in _TRIGGER_WORDS)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with key-shaped strings, each of `secrets` and each key this process knows
    (`known`) replaced by a marker. The one redaction: whatever the app writes, sends or
    prints goes through it."""
    return _redact(text, [*secrets, *known()])


def _redact(text: str, keys: list[str | None]) -> str:
    for secret in keys:
        if not secret or secret not in text:
            continue
        if len(secret) >= MIN_SECRET:
            text = text.replace(secret, MARK)
        elif len(secret) >= MIN_KNOWN:
            text = re.sub(f"(?<![{_WORD}]){re.escape(secret)}(?![{_WORD}])", MARK, text)
    folded = text.casefold()  # the patterns' case-blind letters too ("ſecret", the Kelvin K)
    if not any(t in folded for t in _TRIGGER_WORDS):
        return text
    clean = _AFTER_KEY.sub(lambda m: m.group(1) + MARK, _KEYISH.sub(MARK, text))
    return text if clean == text else clean


def redact_bytes(data: bytes, secrets: Iterable[str | None] = ()) -> bytes:
    """`redact` for raw output (bytes that are not UTF-8 are kept as they were). Fast where
    there is nothing to redact, as in almost all of a long command's output."""
    keys = [s.encode() for s in (*secrets, *known()) if s and len(s) >= MIN_KNOWN]
    lowered = data.lower()
    if not any(t in lowered for t in _TRIGGERS) and not any(k in data for k in keys):
        return data
    text = data.decode("utf-8", "surrogateescape")
    return redact(text, [k.decode() for k in keys]).encode("utf-8", "surrogateescape")


def find_secret(text: str, secrets: Iterable[str | None] = ()) -> str | None:
    """The first key-shaped string, or one of `secrets`, that `text` holds (what `redact`
    would replace), or None when it holds none."""
    for secret in (*secrets, *known()):
        if not secret or secret not in text:
            continue
        if len(secret) >= MIN_SECRET or len(secret) >= MIN_KNOWN and re.search(
                f"(?<![{_WORD}]){re.escape(secret)}(?![{_WORD}])", text):
            return secret
    text = text.replace(MARK, "")  # what was redacted already is no key
    found = _KEYISH.search(text) or _AFTER_KEY.search(text)
    return None if found is None else found.group(0)


def redact_value(value: Any) -> Any:
    """`value` (what JSON holds: dicts, lists, strings, numbers) with every string redacted;
    itself when nothing in it changed."""
    return _redact_value(value, list(known()))


def _redact_value(value: Any, keys: list[str | None]) -> Any:
    if isinstance(value, str):
        return _redact(value, keys)
    if isinstance(value, dict):
        out = {k: _redact_value(v, keys) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, list | tuple):
        items = [_redact_value(v, keys) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def redact_optional(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    return None if text is None else redact(text, secrets)


def environment_secrets(env: Mapping[str, str]) -> set[str]:
    """The values of the environment's secret-named variables (API keys, tokens, passwords)
    that are long enough to be secrets rather than flags, and name no place (TIKTOKEN_CACHE_DIR
    is a folder)."""
    return {v for k, v in env.items()
            if SECRET_NAME.search(k) and not _PLACE_NAME.search(k)
            and len(v) >= MIN_ENV_SECRET and not any(c.isspace() for c in v)}


HELD_MAX = 4096  # a longer run without a space is printed but for its end


class StreamRedactor:
    """Text printed as it arrives (an answer streamed to the terminal) without a key, even one
    split across two pieces: what could still be part of a key (the last word, with the words
    that could make it one: "Bearer", "key provided:"; as many characters as the longest key
    known) is held back until more comes, or `end`."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        """What of everything fed so far can be printed now, redacted."""
        held = self._held + text
        cut = _safe_cut(held)
        self._held = held[cut:]
        return redact(held[:cut]) if cut else ""

    def end(self) -> str:
        """The rest, redacted (the stream ended)."""
        held, self._held = self._held, ""
        return redact(held) if held else ""


_SPACE_RUN = re.compile(r"\s+")
_BREAK = re.compile(r"[^A-Za-z0-9_\-.+/=*~]")  # a character no key shape holds
# a word after which a key may follow (its context, for the patterns above)
_CONTEXT = re.compile(r"(?:key|token|secret|bearer|provided)\W*\Z", re.IGNORECASE)


def _safe_cut(text: str) -> int:
    """Where `text` may be cut so that what is before redacts as it would in the whole: at a
    space before the last word, not right after a word a key may follow ("Bearer"), and not
    within the longest known key's length of the end (a key with a space in it)."""
    keys = known()
    limit = len(text) - max((len(k) for k in keys), default=0)
    spaced = [(i, i + len(k)) for k in keys if _SPACE_RUN.search(k)
              for i in _occurrences(text, k)]  # a key with a space in it: never cut within
    for m in reversed(list(_SPACE_RUN.finditer(text, 0, max(0, limit)))):
        p = m.start()
        if p > 0 and not _CONTEXT.search(text, max(0, p - 40), p) and \
                not any(a < p < b for a, b in spaced):
            return p
    if len(text) <= HELD_MAX:
        return 0
    # one long run without a usable space: cut after a character no key holds
    end = max(0, min(limit, len(text) - HELD_MAX // 4))
    for m in reversed(list(_BREAK.finditer(text, 0, end))):
        p = m.end()
        if not _CONTEXT.search(text, max(0, p - 40), p) and \
                not any(a < p < b for a, b in spaced):
            return p
    return end


def _occurrences(text: str, key: str) -> list[int]:
    found, at = [], text.find(key)
    while at >= 0:
        found.append(at)
        at = text.find(key, at + 1)
    return found

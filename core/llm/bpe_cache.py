"""Tokenizer tables kept ready to load.

tiktoken builds an encoding from its BPE file (shipped inside litellm's package) by decoding
200,000 base64 lines (o200k_base): a wait at the start of every cold command and of the window.
The decoded table is kept in the app's cache folder in `marshal` form (no code runs on loading
it, unlike pickle), keyed by the Python and tiktoken versions and by the BPE files it came from;
it loads in a small part of that time. A missing, stale or unreadable copy is made again from
the BPE file, so the cache can always be deleted.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from pathlib import Path
from typing import Any

_FIELDS = ("name", "pat_str", "mergeable_ranks", "special_tokens")


def load(name: str) -> Any:
    """tiktoken's encoding `name`, from the cache when it holds it, else from tiktoken (then
    cached)."""
    import tiktoken

    path = _path(name, tiktoken.__version__)
    if path is not None:
        try:
            fields = marshal.loads(path.read_bytes())
            if isinstance(fields, dict) and set(fields) == set(_FIELDS):
                # tiktoken's registry is where litellm finds it too (it counts each answer
                # for its price): one copy in memory, not two of 40 MB
                from tiktoken import registry

                return registry.ENCODINGS.setdefault(name, tiktoken.Encoding(**fields))
        except (OSError, ValueError, EOFError, TypeError):
            pass  # made again below
    enc = tiktoken.get_encoding(name)
    if path is not None:
        _keep(path, {"name": enc.name, "pat_str": enc._pat_str,
                     "mergeable_ranks": enc._mergeable_ranks,
                     "special_tokens": enc._special_tokens})
    return enc


def _path(name: str, version: str) -> Path | None:
    """The cache file for `name`, or None when there is no BPE folder to key it by."""
    source = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not source or not Path(source).is_dir():
        return None
    from core.settings import cache_dir

    key = hashlib.sha256(f"{sys.version}|{version}|{name}".encode())
    for f in sorted(Path(source).iterdir()):
        try:
            st = f.stat()
        except OSError:
            continue
        key.update(f"|{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return cache_dir() / "tokenizers" / f"{name}-{key.hexdigest()[:16]}.marshal"


def _keep(path: Path, fields: dict[str, Any]) -> None:
    """Write the cache file (atomically); a cache that cannot be written is no cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(path.name.split("-")[0] + "-*.marshal"):
            old.unlink(missing_ok=True)  # an older Python's, tiktoken's or BPE file's
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(fields))
        os.replace(tmp, path)
    except OSError:
        pass

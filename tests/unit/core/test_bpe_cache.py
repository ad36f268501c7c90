"""The tokenizer's table, kept decoded in the cache folder: what it counts is what tiktoken
counts, a damaged copy is made again, and a copy from other BPE files is never used."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from core.llm import bpe_cache
from core.llm.offline import configure_offline_environment, litellm_package_dir

TEXT = "Ünïcode, code: def f(x): return x ** 2  # and 12345 numbers\n\ttabs"


@pytest.fixture
def bpe_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the BPE files litellm ships, as the folder tiktoken reads."""
    configure_offline_environment()
    pkg = litellm_package_dir()
    if pkg is None:
        pytest.skip("litellm is not installed")
    source = pkg / "litellm_core_utils" / "tokenizers"
    folder = tmp_path / "bpe"
    shutil.copytree(source, folder)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
    return folder


def _cached(name: str) -> list[Path]:
    from core.settings import cache_dir

    return sorted((cache_dir() / "tokenizers").glob(f"{name}-*.marshal"))


def test_the_cached_table_counts_as_tiktoken_does(bpe_dir: Path) -> None:
    import tiktoken

    first = bpe_cache.load("cl100k_base")  # from the BPE file; kept
    assert len(_cached("cl100k_base")) == 1
    again = bpe_cache.load("cl100k_base")  # from the cache
    reference = tiktoken.get_encoding("cl100k_base")
    assert again.encode(TEXT) == first.encode(TEXT) == reference.encode(TEXT)
    assert again.encode("<|endoftext|>", allowed_special="all") == [100257]


def test_a_damaged_copy_is_made_again(bpe_dir: Path) -> None:
    bpe_cache.load("cl100k_base")
    [copy] = _cached("cl100k_base")
    copy.write_bytes(b"\x00not marshal at all")
    enc = bpe_cache.load("cl100k_base")
    assert enc.decode(enc.encode(TEXT)) == TEXT
    [remade] = _cached("cl100k_base")
    assert remade.stat().st_size > 1_000_000


def test_other_bpe_files_never_use_the_copy(bpe_dir: Path) -> None:
    bpe_cache.load("cl100k_base")
    [before] = _cached("cl100k_base")
    for f in bpe_dir.iterdir():  # the BPE files replaced (a litellm upgrade)
        os.utime(f, (1_000_000_000, 1_000_000_000))
    bpe_cache.load("cl100k_base")
    [after] = _cached("cl100k_base")
    assert after.name != before.name  # a copy for the new files, the old one gone


def test_the_table_read_from_the_cache_is_the_one_litellm_counts_with(bpe_dir: Path) -> None:
    import tiktoken

    bpe_cache.load("cl100k_base")  # kept
    enc = bpe_cache.load("cl100k_base")  # from the cache
    # litellm prices each answer with tiktoken.get_encoding: the same table, not a second
    # copy of it in memory (and loaded again mid-turn)
    assert tiktoken.get_encoding("cl100k_base") is enc

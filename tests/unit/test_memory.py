"""What a conversation the user left behind leaves in memory: nothing, once another is shown,
even what sat in reference cycles among the frozen objects of a long conversation."""

from __future__ import annotations

import gc
import platform
import weakref

import pytest

from app.window import memory


class Entry:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_a_left_conversations_cycles_are_collected_and_what_lives_stays_frozen() -> None:
    left, kept = Entry(), Entry()
    gone = weakref.ref(left)
    gc.freeze()  # as after showing the conversation they belonged to
    try:
        del left
        gc.collect()
        assert gone() is not None  # frozen: a collection alone never frees it
        memory.settle(collect=False)  # a short conversation was left: no full collection
        assert gone() is not None
        memory.settle()  # a long one was left
        assert gone() is None
        assert gc.get_freeze_count() > 0 and kept.me is kept
    finally:
        gc.unfreeze()


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_free_pages_can_be_given_back_on_glibc() -> None:
    assert memory.release()

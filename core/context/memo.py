"""What the compaction stages remember and decide: `CompactionMemo`, per-entry work kept with
a conversation's build cache (log entries never change, so a build after an append only looks at
what is new), and `Compaction`, one compaction's decisions over a build's candidates."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.context.failures import Failure
from core.context.fold import Checkpoint, Facts
from core.model import ConversationMessage


@dataclass
class CompactionMemo:
    """Per-entry work, by entry id (log entries never change)."""

    encoding: str = ""
    previews: dict[str, tuple[ConversationMessage, int]] = field(default_factory=dict)
    references: dict[str, tuple[ConversationMessage, int]] = field(default_factory=dict)
    scores: dict[str, tuple[float, str]] = field(default_factory=dict)
    facts: dict[str, Facts] = field(default_factory=dict)
    unchanged: set[str] = field(default_factory=set)  # calls whose arguments are short
    counted: tuple[str, int] = ("", 0)  # the last digest and its tokens
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)  # see fold_units
    failures: dict[str, Failure | None] = field(default_factory=dict)  # a command's result
    plans: dict[str, str] = field(default_factory=dict)  # the todo list up to a message

    def for_encoding(self, name: str) -> CompactionMemo:
        if name != self.encoding:
            self.encoding = name
            self.previews.clear()
            self.references.clear()
            self.scores.clear()
            self.counted = ("", 0)
            self.checkpoints.clear()
        return self


@dataclass
class Compaction:
    """What the stages decided (indexes are into the build's candidates and units)."""

    cands: list[tuple[ConversationMessage, int]]  # the view: shortened copies where changed
    unit_tokens: list[int]
    staged: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)
    left_out: dict[int, str] = field(default_factory=dict)  # unit -> reason (digested)
    logged: dict[int, ConversationMessage] = field(default_factory=dict)  # shortened: as logged
    digest: str = ""
    digest_tokens: int = 0


"""The user's rules: sentences of their messages that state a constraint, kept verbatim.

"Never change the public API", "you must keep line numbers", "don't touch the tests", 必须 …:
a model that loses such a sentence breaks it. A long message's opening does not hold it, so the
digest collects them from every user message it stands for, whole and word for word.

A rule is a sentence of prose (a fenced code block is not read; a "sentence" longer than
MAX_RULE_CHARS is a pasted log, not a rule) with a word of obligation or prohibition in it, in
English or Chinese (the languages the key-message scorer knows).
"""

from __future__ import annotations

import re

MIN_RULE_CHARS = 8
MAX_RULE_CHARS = 300
READ_CHARS = 50_000  # of a message: the rest of a huge paste is not searched
# The words of obligation and prohibition, one list for the rules and for the key-message
# scorer's "constraints" (core/context/compaction.py).
_WORDS = (r"must(?:n't)?|should(?:n't)?|never|always|don't|do not|doesn't|does not|can't|cannot|"
          r"required?|important|only|avoid|make sure|ensure|needs?|need to|have to|has to|keep|"
          r"not allowed|forbidden|prefer|instead of")
_CJK = r"必须|需要|不要|务必|一定|禁止|不能|不得|请勿"
CONSTRAINT = re.compile(rf"\b(?:{_WORDS})\b|{_CJK}")  # over lower-cased text
RULE_WORDS = re.compile(CONSTRAINT.pattern, re.IGNORECASE)
# The same words without the boundaries, as substrings of lower-cased text: a quick "no" for
# most messages (`in` on a handful of words is several times faster than any pattern that
# starts with \b, which is tried at every position). "ensure" and "make sure" hold "sure";
# "don't", "cannot", "do not" hold "n't" or "not"; "require" and "required" hold "requir".
_HINTS = ("not", "n't", "only", "need", "must", "should", "never", "always", "sure", "keep",
          "avoid", "requir", "important", "have to", "has to", "forbidden", "prefer",
          "instead", *_CJK.split("|"))


def may_hold_rule(lowered: str) -> bool:
    """Whether lower-cased text may hold a word of obligation (False: it holds none)."""
    for word in _HINTS:
        if word in lowered:
            return True
    return False


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def rule_key(sentence: str) -> str:
    """Two wordings of one rule that differ only in case, spacing or punctuation are one."""
    return " ".join(re.sub(r"[^\w\s]", " ", sentence.lower()).split())


def rules_in(text: str) -> tuple[str, ...]:
    """The constraint sentences of a user message, in order, whitespace collapsed."""
    text = text[:READ_CHARS]
    if not may_hold_rule(text.lower()):
        return ()
    if "```" in text:
        text = _FENCE.sub("\n", text)
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        collapsed = " ".join(sentence.split())
        if MIN_RULE_CHARS <= len(collapsed) <= MAX_RULE_CHARS and RULE_WORDS.search(collapsed):
            out.append(collapsed)
    return tuple(out)

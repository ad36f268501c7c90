"""The user's rules: constraint sentences found in a message, word for word."""

from __future__ import annotations

from core.context.rules import MAX_RULE_CHARS, rule_key, rules_in


def test_constraint_sentences_are_found_whole_and_in_order() -> None:
    text = ("Please look at the parser. You must keep line numbers. It is slow today!\n"
            "Don't touch the tests. 这个接口必须保持不变。另外看看日志。")
    assert rules_in(text) == ("You must keep line numbers.", "Don't touch the tests.",
                              "这个接口必须保持不变。")


def test_a_rule_deep_in_a_long_message_is_found() -> None:
    text = "Background: " + "the module reads files and parses them. " * 200
    text += "\n\nNever change the public API of parse()."
    assert rules_in(text)[-1] == "Never change the public API of parse()."


def test_code_blocks_and_pasted_log_lines_are_not_rules() -> None:
    text = ("Here is the failure:\n```\nassert x, 'value must be set'\n```\n"
            "log: " + "must " * (MAX_RULE_CHARS // 5) + "\nAvoid global state.")
    assert rules_in(text) == ("Avoid global state.",)


def test_a_message_without_constraint_words_has_no_rules() -> None:
    assert rules_in("Round 3: please look at src/mod_3.py and fix it") == ()


def test_two_wordings_that_differ_in_case_and_punctuation_are_one_rule() -> None:
    assert rule_key("Never change the public API!") == rule_key("never change the  public API.")
    assert rule_key("Never change the public API") != rule_key("Always change the public API")


def test_every_word_of_obligation_passes_the_quick_check() -> None:
    # "require" was missed: the quick check looked for "required" only
    assert rules_in("Hello there. Our tests require Python 3.11 and a database.") == (
        "Our tests require Python 3.11 and a database.",)
    for word in ("must", "mustn't", "should", "never", "always", "don't", "do not", "doesn't",
                 "can't", "cannot", "required", "important", "only", "avoid", "make sure",
                 "ensure", "needs", "have to", "has to", "keep", "not allowed", "forbidden",
                 "prefer", "instead of"):
        sentence = f"Please, {word.upper()} the thing for me."
        assert rules_in(f"Hi. {sentence}") == (sentence,), word
    assert rules_in("请看一下。这个接口不得修改。") == ("这个接口不得修改。",)

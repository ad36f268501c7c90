from __future__ import annotations

from core.llm.tokens import TokenCounter, encoding_for_model
from core.model import ConversationMessage

# OpenAI's published example ("How to count tokens with tiktoken"): 129 prompt tokens on gpt-4.
COOKBOOK = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
]


def test_counts_match_openais_published_example() -> None:
    counter = TokenCounter("cl100k_base")
    msgs = [ConversationMessage.from_openai(m) for m in COOKBOOK]
    assert counter.messages(msgs) == 129


def test_current_openai_models_use_o200k() -> None:
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("openai/gpt-4.1") == "o200k_base"
    assert encoding_for_model("anthropic/claude-3-5-sonnet") == "cl100k_base"


def test_special_token_text_is_counted_not_refused() -> None:
    assert TokenCounter("o200k_base").text("<|endoftext|> hello") > 2


def test_stored_count_is_used_without_re_tokenizing() -> None:
    counter = TokenCounter("o200k_base")
    msg = counter.with_count(ConversationMessage(role="user", content="hello world " * 50))
    fake = msg.model_copy(update={"token_counts": {"o200k_base": 12345}})
    assert counter.message(fake) == 12345


def test_bpe_files_come_from_litellms_package_not_the_internet() -> None:
    import os

    from core.llm.runtime import configure_offline_environment, litellm_package_dir

    configure_offline_environment()
    pkg = litellm_package_dir()
    assert pkg is not None
    assert os.environ["TIKTOKEN_CACHE_DIR"].startswith(str(pkg))
    assert TokenCounter("cl100k_base").text("hello world") == 2

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

    from core.llm.offline import configure_offline_environment, litellm_package_dir

    configure_offline_environment()
    pkg = litellm_package_dir()
    assert pkg is not None
    assert os.environ["TIKTOKEN_CACHE_DIR"].startswith(str(pkg))
    assert TokenCounter("cl100k_base").text("hello world") == 2


def test_the_window_and_the_engine_count_an_entry_once(tmp_path: object) -> None:
    """Contexts of one process share one counter per encoding: an entry counted for one build
    (the window's meter) is not counted again for another context's fresh build (a
    10,000-entry log is seconds of counting before the first token)."""
    from pathlib import Path

    from core.context.service import ProjectContext
    from core.settings import LLMSettings
    from core.store.project import Project

    assert isinstance(tmp_path, Path)
    with Project.open(tmp_path / "p") as project:
        conv = project.conversations.create("c").id
        project.conversations.append_many(conv, [ConversationMessage(
            role="user" if n % 2 == 0 else "assistant", content=f"entry {n} " * 30)
            for n in range(40)])
        history = project.conversations.load(conv).messages
        assert not any(m.token_counts for m in history)  # counted only when built
        settings = LLMSettings(model="gpt-4")
        window = ProjectContext.for_project(project)
        window.build(conv, history, settings, "chat", ask_servers=False)
        engine = ProjectContext.for_project(project)
        counted: list[str] = []
        counter = engine.counter(settings.model)
        original = counter.text

        def counting(text: str) -> int:
            counted.append(text)
            return original(text)

        counter.text = counting  # type: ignore[method-assign]  # this counter's calls, seen
        try:
            engine.caches = type(engine.caches)()  # the engine's own cache: it builds afresh
            engine.build(conv, list(history), settings, "chat")
        finally:
            del counter.text
        assert counted and not [t for t in counted if t.startswith("entry ")]


def test_the_first_counter_of_a_process_is_made_without_waiting_on_itself() -> None:
    """The shared counter is made while its encoding is not loaded yet (a fresh process: the
    window's first meter refresh). Making it loads the encoding under its own lock; a counter
    made under that same lock hung the window at start-up."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    code = ("from core.llm.tokens import TokenCounter\n"
            "print(TokenCounter.for_model('gpt-4').text('hello world'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"

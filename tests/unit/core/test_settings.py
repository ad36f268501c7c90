from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import (
    GlobalSettings,
    ProviderEntry,
    SettingsError,
    SettingsStore,
    lookup_api_key,
    resolve_llm_settings,
)


def test_precedence_cli_env_project_global_default() -> None:
    g = GlobalSettings(providers=[ProviderEntry(name="local", model="ollama/llama3",
                                                api_base="http://localhost:11434",
                                                max_output_tokens=1000)],
                       active_provider="local")
    assert resolve_llm_settings(env={}, global_settings=g).model == "ollama/llama3"
    s = resolve_llm_settings(env={}, project={"model": "gpt-4o"}, global_settings=g)
    assert (s.model, s.sources["model"], s.api_base) == ("gpt-4o", "project", "http://localhost:11434")
    s = resolve_llm_settings(env={"WORKBENCH_MODEL": "gpt-4.1"}, project={"model": "gpt-4o"},
                             global_settings=g)
    assert (s.model, s.sources["model"]) == ("gpt-4.1", "environment")
    s = resolve_llm_settings(cli={"model": "claude"}, env={"WORKBENCH_MODEL": "gpt-4.1"})
    assert (s.model, s.sources["model"]) == ("claude", "command line")
    d = resolve_llm_settings(env={})
    assert d.sources == {"model": "default", "api_base": "default", "max_output_tokens": "default",
                         "context_window": "default", "auto_retries": "default",
                         "request_timeout": "default", "step_limit": "default",
                         "tool_output_tokens": "default", "summary_model": "default",
                         "auto_summary": "default", "auto_title": "default",
                         "images": "default", "cost_cap": "default",
                         "project_cost_cap": "default"}
    assert d.summary_model is None and d.auto_summary is True
    off = resolve_llm_settings(env={"WORKBENCH_AUTO_SUMMARY": "off",
                                    "WORKBENCH_SUMMARY_MODEL": "openai/cheap"})
    assert off.auto_summary is False and off.summary_model == "openai/cheap"
    with pytest.raises(SettingsError, match="automatic summaries"):
        resolve_llm_settings(env={"WORKBENCH_AUTO_SUMMARY": "sometimes"})


def test_bad_max_tokens_names_its_source() -> None:
    with pytest.raises(SettingsError, match="from the environment must be a positive"):
        resolve_llm_settings(env={"WORKBENCH_MAX_OUTPUT_TOKENS": "lots"})


def test_settings_round_trip_and_recent_projects(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    for name in ("a", "b", "a"):
        store.remember_project(tmp_path / name)
    assert [Path(p).name for p in store.load().recent_projects] == ["a", "b"]


def test_broken_settings_file_is_kept_aside_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text("{broken")
    store = SettingsStore(tmp_path)
    assert store.load() == GlobalSettings() and store.problem
    store.remember_project(tmp_path / "p")  # incidental writes leave the user's file alone
    assert (tmp_path / "settings.json").read_text() == "{broken"
    assert store.save(GlobalSettings(model="x"), replace_unreadable=True)  # the user saved
    assert (tmp_path / "settings.json.bad").read_text() == "{broken"
    assert store.load().model == "x" and store.problem is None


def test_keys_come_from_the_environment_and_a_missing_keyring_is_no_crash() -> None:
    assert lookup_api_key("anthropic", env={"ANTHROPIC_API_KEY": "sk-ant"}) == "sk-ant"
    assert lookup_api_key("openai", env={}) is None  # the test keyring backend always fails


def test_a_saved_key_follows_only_its_own_base_url() -> None:
    g = GlobalSettings(providers=[ProviderEntry(name="local", model="openai/m",
                                                api_base="http://localhost:8080/v1",
                                                key_name="openai-compatible")],
                       active_provider="local")
    assert resolve_llm_settings(env={}, global_settings=g).key_name == "openai-compatible"
    moved = resolve_llm_settings(cli={"api_base": "http://elsewhere:9/v1"}, env={},
                                 global_settings=g)
    assert moved.key_name is None


def test_custom_base_url_gets_only_its_own_key() -> None:
    from core.settings import key_for_request

    env = {"OPENAI_API_KEY": "sk-openai", "WORKBENCH_API_KEY": "sk-local"}
    assert key_for_request("openai", None, None, env) == "sk-openai"
    assert key_for_request("openai", "http://localhost:8080/v1", None, env) == "sk-local"
    assert key_for_request("openai", "http://localhost:8080/v1", None,
                           {"OPENAI_API_KEY": "sk-openai"}) is None


def test_settings_are_parsed_once_per_change_and_callers_get_their_own_copy(tmp_path: Path) -> None:
    import os

    store = SettingsStore(tmp_path)
    store.save(GlobalSettings(model="first"))
    a = store.load()
    a.model = "changed by a caller"  # must not leak into the next load
    assert store.load().model == "first"
    assert store.load() is not store.load()
    store.save(GlobalSettings(model="second"))
    assert store.load().model == "second"  # a new file is read again
    (tmp_path / "settings.json").write_text('{"model": "edited by hand"}')
    os.utime(tmp_path / "settings.json", ns=(1, 1))  # even with an odd mtime: size differs
    assert store.load().model == "edited by hand"


def test_the_request_timeout_comes_from_every_layer_and_must_be_positive() -> None:
    assert resolve_llm_settings(env={}).request_timeout == 600.0
    g = GlobalSettings(request_timeout=120)
    s = resolve_llm_settings(env={}, project={"request_timeout": "45"}, global_settings=g)
    assert (s.request_timeout, s.sources["request_timeout"]) == (45.0, "project")
    assert resolve_llm_settings(env={}, global_settings=g).request_timeout == 120.0
    s = resolve_llm_settings(cli={"request_timeout": 2.5},
                             env={"WORKBENCH_REQUEST_TIMEOUT": "30"})
    assert (s.request_timeout, s.sources["request_timeout"]) == (2.5, "command line")
    for bad in ("0", "-3", "soon", "inf", "nan"):
        with pytest.raises(SettingsError, match="request timeout from the project must be a "
                                                "positive number of seconds"):
            resolve_llm_settings(env={}, project={"request_timeout": bad})


def test_images_is_an_on_off_setting_with_a_clear_error() -> None:
    assert resolve_llm_settings(env={"WORKBENCH_IMAGES": "1"}).images is True
    assert resolve_llm_settings(env={"WORKBENCH_IMAGES": "off"}).images is False
    assert resolve_llm_settings(env={}).images is None  # as litellm's map says
    with pytest.raises(SettingsError, match="whether the model accepts images from the "
                                            "environment must be on or off"):
        resolve_llm_settings(env={"WORKBENCH_IMAGES": "maybe"})

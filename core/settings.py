"""Settings: global ones in the platform's config folder, per-project overrides, and secrets.

Precedence for every LLM setting: CLI flag > environment > project > global > default.
API keys are looked up in the environment first, then in the OS keyring; they are never written
to a project folder, a log line or an export.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.redact import remember
from core.store.fileio import atomic_write_json, read_json

APP_NAME = "context-workbench"
KEYRING_SERVICE = "context-workbench"
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_MAX_OUTPUT_TOKENS = 4096
MAX_RECENT = 12

# provider -> environment variable litellm reads for its key
KEY_ENV_VARS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "azure": "AZURE_API_KEY",
}
# providers that run on the user's machine and need no key
KEYLESS_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm", "vllm"}

ENV_MODEL = "WORKBENCH_MODEL"
ENV_API_BASE = "WORKBENCH_API_BASE"
ENV_MAX_TOKENS = "WORKBENCH_MAX_OUTPUT_TOKENS"
ENV_API_KEY = "WORKBENCH_API_KEY"
ENV_CONTEXT_WINDOW = "WORKBENCH_CONTEXT_WINDOW"
ENV_AUTO_RETRIES = "WORKBENCH_AUTO_RETRIES"
ENV_REQUEST_TIMEOUT = "WORKBENCH_REQUEST_TIMEOUT"
ENV_STEP_LIMIT = "WORKBENCH_STEP_LIMIT"
ENV_TOOL_OUTPUT_TOKENS = "WORKBENCH_TOOL_OUTPUT_TOKENS"
ENV_SUMMARY_MODEL = "WORKBENCH_SUMMARY_MODEL"
ENV_AUTO_SUMMARY = "WORKBENCH_AUTO_SUMMARY"
ENV_AUTO_TITLE = "WORKBENCH_AUTO_TITLE"
ENV_COST_CAP = "WORKBENCH_COST_CAP"  # USD a conversation may spend (core.cost)
ENV_IMAGES = "WORKBENCH_IMAGES"  # the model accepts images (1/0); unset: as litellm knows it
DEFAULT_STEP_LIMIT = 50  # rounds of tool calls in one turn before the agent pauses
DEFAULT_TOOL_OUTPUT_TOKENS = 4000  # a larger tool result is offloaded with a preview
DEFAULT_AUTO_RETRIES = 3
DEFAULT_REQUEST_TIMEOUT = 600.0  # seconds without an answer before a request is given up


class SettingsError(ValueError):
    """A settings value or file that cannot be used; the message says which and why."""


class ProviderEntry(BaseModel):
    """A named way to reach a model: the model string litellm understands and where to send it."""

    model_config = ConfigDict(extra="ignore")
    name: str
    model: str
    api_base: str | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    context_window: int | None = Field(default=None, gt=0)  # None: from the model or server
    key_name: str | None = None  # the keyring entry holding this provider's key
    images: bool | None = None  # the model accepts images (None: as litellm's map says)


class GlobalSettings(BaseModel):
    model_config = ConfigDict(extra="allow")
    recent_projects: list[str] = Field(default_factory=list)
    providers: list[ProviderEntry] = Field(default_factory=list)
    active_provider: str | None = None
    model: str | None = None
    api_base: str | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    request_timeout: float | None = Field(default=None, gt=0)
    summary_model: str | None = None  # a cheaper model for compaction summaries
    auto_summary: bool | None = None  # summaries in the background after a long turn
    auto_title: bool | None = None  # new conversations titled by the model after one answer
    theme: str | None = None  # "light" or "dark"; None follows the desktop's colour scheme
    cost_cap: float | None = Field(default=None, ge=0)  # USD per conversation (core.cost)
    project_cost_cap: float | None = Field(default=None, ge=0)  # USD per project

    def provider(self, name: str | None) -> ProviderEntry | None:
        return next((p for p in self.providers if p.name == name), None)


class LLMSettings(BaseModel):
    """The effective settings for one request, and where each value came from."""

    model: str = DEFAULT_MODEL
    api_base: str | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    context_window: int | None = None  # overrides litellm's figure for the model
    auto_retries: int = DEFAULT_AUTO_RETRIES  # transient failures retried before giving up
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT  # seconds
    step_limit: int = DEFAULT_STEP_LIMIT
    tool_output_tokens: int = DEFAULT_TOOL_OUTPUT_TOKENS
    summary_model: str | None = None  # None: the conversation's model writes its summaries
    auto_summary: bool = True  # a summary is prepared in the background after a long turn
    auto_title: bool = True  # an untitled conversation is titled after its first answer
    images: bool | None = None  # the model accepts images (None: as litellm's map says)
    cost_cap: float | None = None  # USD a conversation may spend (None: no cap)
    project_cost_cap: float | None = None  # USD the project's conversations may spend together
    key_name: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """What can be made again from what ships with the app (the tokenizers' tables)."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def state_dir() -> Path:
    """Where the app keeps what is neither settings nor data: the crash log."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


class SettingsStore:
    """Reads and writes `settings.json` in the config folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or config_dir()
        self.path = self.folder / "settings.json"
        self.problem: str | None = None
        self._cached: tuple[tuple[int, int, int], GlobalSettings, str | None] | None = None

    def load(self) -> GlobalSettings:
        """The saved settings; defaults when the file is missing. An unreadable file gives
        defaults too, with `problem` saying so: callers that would send a request refuse then,
        rather than send to a provider the user did not choose."""
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp is not None and self._cached is not None and self._cached[0] == stamp:
            # Several reads a turn: parse the file once per change, hand out copies.
            self.problem = self._cached[2]
            return self._cached[1].model_copy(deep=True)
        self.problem = None
        try:
            value = GlobalSettings.model_validate(read_json(self.path))
        except FileNotFoundError:
            return GlobalSettings()
        except (OSError, ValueError, ValidationError) as e:
            # A broken settings file must not stop the app; say so and keep the file for the user.
            self.problem = f"{self.path} could not be read ({type(e).__name__})"
            value = GlobalSettings()
        if stamp is not None:
            self._cached = (stamp, value, self.problem)
        return value.model_copy(deep=True)

    def save(self, settings: GlobalSettings, *, replace_unreadable: bool = False) -> bool:
        """Write `settings`. A file that could not be read is left alone (so remembering a
        project or the window's size never discards the user's providers) unless the user saved
        Settings (`replace_unreadable`): then it is moved aside to `settings.json.bad` first.
        Returns whether the file was written."""
        if self.problem and self.path.exists():
            if not replace_unreadable:
                return False
            self.path.replace(self.path.with_suffix(".json.bad"))
            self.problem = None
        atomic_write_json(self.path, settings.model_dump(mode="json", exclude_none=True))
        return True

    def remember_project(self, path: Path) -> GlobalSettings:
        settings = self.load()
        p = str(Path(path).absolute())
        settings.recent_projects = [p] + [x for x in settings.recent_projects if x != p]
        settings.recent_projects = settings.recent_projects[:MAX_RECENT]
        self.save(settings)
        return settings


LLM_KEYS = ("model", "api_base", "max_output_tokens", "context_window", "auto_retries",
            "request_timeout", "step_limit", "tool_output_tokens", "summary_model",
            "auto_summary", "auto_title", "images", "cost_cap", "project_cost_cap")


def resolve_llm_settings(
    *,
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    project: Mapping[str, Any] | None = None,
    global_settings: GlobalSettings | None = None,
) -> LLMSettings:
    """Merge the layers: CLI flag > environment > project > global > default."""
    env = os.environ if env is None else env
    g = global_settings or GlobalSettings()
    provider = g.provider(g.active_provider)
    layers = [
        ("command line", dict(cli or {})),
        ("environment", _env_layer(env)),
        ("project", dict(project or {})),
        ("global", _global_layer(g, provider)),
    ]
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in LLM_KEYS:
        for source, layer in layers:
            value = layer.get(key)
            if value not in (None, ""):
                values[key], sources[key] = value, source
                break
        else:
            sources[key] = "default"
    _check_flag_and_text(values, sources)
    _check_numbers(values, sources)
    if project and any(sources.get(k) == "project" for k in LOWER_ONLY):
        _only_lowered(values, sources, resolve_llm_settings(
            cli=cli, env=env, project=None, global_settings=global_settings))
    # The saved key belongs to the saved provider: it follows only when its base URL is the one
    # in use, so a key never travels to a server the user did not save it for.
    key_name = None
    if provider is not None and provider.key_name and values.get("api_base") == provider.api_base:
        key_name = provider.key_name
    return LLMSettings(**values, key_name=key_name, sources=sources)


# A project's folder may come from anywhere: it may lower these limits, never lift the user's.
LOWER_ONLY = ("cost_cap", "project_cost_cap", "step_limit")


def _only_lowered(values: dict[str, Any], sources: dict[str, str], below: LLMSettings) -> None:
    """A limit the project's settings lift above what the user's own give stays the user's."""
    for key in LOWER_ONLY:
        theirs = getattr(below, key)
        if sources.get(key) == "project" and theirs is not None and values[key] > theirs:
            values[key], sources[key] = theirs, below.sources.get(key, "default")


def _global_layer(g: GlobalSettings, provider: ProviderEntry | None) -> dict[str, Any]:
    """The global settings' values: the active provider's, then the global fields."""
    layer: dict[str, Any] = {}
    if provider is not None:
        layer.update(provider.model_dump(exclude={"name", "key_name"}, exclude_none=True))
    layer.update({k: getattr(g, k, None) for k in (
        "model", "api_base", "max_output_tokens", "request_timeout", "step_limit",
        "tool_output_tokens", "summary_model", "auto_summary", "auto_title", "cost_cap",
        "project_cost_cap")
        if getattr(g, k, None) is not None})
    return layer


def _env_layer(env: Mapping[str, str]) -> dict[str, str | None]:
    return {
        "model": env.get(ENV_MODEL),
        "api_base": env.get(ENV_API_BASE),
        "max_output_tokens": env.get(ENV_MAX_TOKENS),
        "context_window": env.get(ENV_CONTEXT_WINDOW),
        "auto_retries": env.get(ENV_AUTO_RETRIES),
        "request_timeout": env.get(ENV_REQUEST_TIMEOUT),
        "step_limit": env.get(ENV_STEP_LIMIT),
        "tool_output_tokens": env.get(ENV_TOOL_OUTPUT_TOKENS),
        "summary_model": env.get(ENV_SUMMARY_MODEL),
        "auto_summary": env.get(ENV_AUTO_SUMMARY),
        "auto_title": env.get(ENV_AUTO_TITLE),
        "images": env.get(ENV_IMAGES),
        "cost_cap": env.get(ENV_COST_CAP),
    }


def _check_flag_and_text(values: dict[str, Any], sources: dict[str, str]) -> None:
    """Make the on/off flag a bool; text settings must be text. Raises SettingsError."""
    for key, what in (("auto_summary", "automatic summaries"), ("auto_title", "automatic titles"),
                      ("images", "whether the model accepts images")):
        if key not in values or isinstance(values[key], bool):
            continue
        flag = str(values[key]).strip().lower()
        if flag not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise SettingsError(
                f"{what} from the {sources[key]} must be on or off "
                f"(1/0, true/false), not {values[key]!r}")
        values[key] = flag in ("1", "true", "yes", "on")
    for key in ("model", "api_base", "summary_model"):
        if key in values and not isinstance(values[key], str):
            raise SettingsError(
                f"the {key.replace('_', ' ')} from the {sources[key]} settings must be text, "
                f"not {values[key]!r}")


def _check_numbers(values: dict[str, Any], sources: dict[str, str]) -> None:
    """Make the numeric settings numbers, in range. Raises SettingsError."""
    for key, label in (("max_output_tokens", "max output tokens"),
                       ("context_window", "the context window"),
                       ("step_limit", "the step limit"),
                       ("tool_output_tokens", "the tool output limit")):
        if key in values:
            try:
                values[key] = int(values[key])
                if values[key] <= 0:
                    raise ValueError
            except (TypeError, ValueError):
                raise SettingsError(
                    f"{label} from the {sources[key]} must be a positive whole number, "
                    f"not {values[key]!r}"
                ) from None
    if "request_timeout" in values:
        try:
            values["request_timeout"] = float(values["request_timeout"])
            if not 0 < values["request_timeout"] < float("inf"):
                raise ValueError
        except (TypeError, ValueError):
            raise SettingsError(
                f"the request timeout from the {sources['request_timeout']} must be a positive "
                f"number of seconds, not {values['request_timeout']!r}") from None
    for key, label in (("cost_cap", "the cost cap"),
                       ("project_cost_cap", "the project's cost cap")):
        if key in values:
            try:
                values[key] = float(str(values[key]).lstrip("$"))
                if not 0 <= values[key] < float("inf"):
                    raise ValueError
            except (TypeError, ValueError):
                raise SettingsError(
                    f"{label} from the {sources[key]} must be a number of US dollars, "
                    f"not {values[key]!r}") from None
    if "auto_retries" in values:
        try:
            values["auto_retries"] = max(0, int(values["auto_retries"]))
        except (TypeError, ValueError):
            raise SettingsError(
                f"automatic retries from the {sources['auto_retries']} must be a whole number, "
                f"not {values['auto_retries']!r}") from None


# --- secrets -----------------------------------------------------------------------------------


def key_env_var(provider: str) -> str:
    return KEY_ENV_VARS.get(provider, f"{provider.upper()}_API_KEY")


def lookup_api_key(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key for `provider` from the environment, else from the OS keyring, else None."""
    env = os.environ if env is None else env
    value = env.get(key_env_var(provider))
    if value:
        return value
    return keyring_get(provider)


def key_for_request(
    provider: str,
    api_base: str | None,
    key_name: str | None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Which key to send, if any.

    A provider's own key (OPENAI_API_KEY, ...) goes only to that provider's own address. A custom
    base URL (a local or third-party OpenAI-compatible server) gets only a key meant for it: the
    one saved with its provider entry, or WORKBENCH_API_KEY. So a real OpenAI key is never sent
    to some other server just because it speaks the same protocol.
    """
    env = os.environ if env is None else env
    if key_name:
        stored = keyring_get(key_name)
        if stored:
            return stored
    if api_base:
        return env.get(ENV_API_KEY) or None
    return lookup_api_key(provider, env)


def keyring_works() -> bool:
    """Whether a system keyring can keep keys here (a headless machine often has none)."""
    try:
        import keyring
        from keyring.backends.fail import Keyring as FailKeyring

        return not isinstance(keyring.get_keyring(), FailKeyring)
    except Exception:  # any backend failure means "no keyring here"
        return False


def keyring_get(provider: str) -> str | None:
    try:
        import keyring
        from keyring.errors import KeyringError

        try:
            key = keyring.get_password(KEYRING_SERVICE, provider)
        except KeyringError:
            return None
        remember([key])  # a key in use: never written, sent or printed
        return key
    except Exception:  # any keyring backend failure means "no keyring here"
        return None


def keyring_set(provider: str, key: str) -> bool:
    """Store a key in the OS keyring; False when no working keyring exists. Either way the
    key is one in use: never written, sent or printed."""
    remember([key])
    try:
        import keyring

        keyring.set_password(KEYRING_SERVICE, provider, key)
        return True
    except Exception:  # any backend failure: the caller explains the env var
        return False

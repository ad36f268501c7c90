"""What the Settings dialog offers and returns: the provider presets, the user's choice, and
the dollar-cap field its cost limits use."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QDoubleSpinBox, QWidget


@dataclass(frozen=True)
class Preset:
    name: str
    provider: str  # litellm provider, for the key's environment variable
    model: str
    api_base: str | None
    key_env: str | None  # None: no key needed


PRESETS = [
    Preset("OpenAI", "openai", "gpt-4o-mini", None, "OPENAI_API_KEY"),
    Preset("Anthropic", "anthropic", "anthropic/claude-3-5-sonnet-latest", None,
           "ANTHROPIC_API_KEY"),
    Preset("Ollama (local)", "ollama", "ollama/llama3.1", "http://localhost:11434", None),
    Preset("OpenAI-compatible server", "openai-compatible", "openai/local-model",
           "http://localhost:8080/v1", None),
]


@dataclass(frozen=True)
class SettingsChoice:
    """What the user chose; the API key is None when the field was left empty."""

    preset: Preset
    model: str
    api_base: str | None
    max_output_tokens: int
    api_key: str | None
    context_window: int | None = None  # None: from the model's server or litellm
    summary_model: str | None = None  # None: the model writes its own summaries
    auto_summary: bool = True
    auto_title: bool = True
    images: bool = False  # the user says the model reads images (else: litellm's map says)
    cost_cap: float | None = None  # USD a conversation may spend (None: no cap)
    project_cost_cap: float | None = None  # USD a project's conversations may spend


def cap_box(parent: QWidget, value: float | None, tip: str) -> QDoubleSpinBox:
    """A cap in US dollars; 0 shows as "no cap"."""
    box = QDoubleSpinBox(parent)
    box.setRange(0, 100_000)
    box.setDecimals(2)
    box.setSingleStep(1.0)
    box.setPrefix("$")
    box.setSpecialValueText("no cap")
    box.setValue(value or 0)
    box.setToolTip(tip)
    return box

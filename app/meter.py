"""The status bar's context meter: the request the next turn would send, against the budget.

The build is the real one (the same `Engine.build` a turn runs, incremental per conversation);
only the draft is recounted on a keystroke, debounced, with the model of the last build.
"""

from __future__ import annotations

from collections.abc import Callable

from app.settings_flow import SettingsFlow
from core.agents import Agent
from core.context.builder import BudgetError, BuildReport
from core.context.report_text import tooltip_lines, usage_state
from core.context.service import ContextService
from core.llm import runtime
from core.model import ConversationMessage, Mode
from core.settings import SettingsError
from ui.main_window import MainWindow

EXACT_DRAFT_CHARS = 200_000  # longer drafts are estimated (4 chars a token), not tokenized


class UsageMeter:
    """Attributes:
        report: the last build's report (None when there is no conversation or no build).
        context: builds on the window's thread for the meter (set when a project opens; the
            turn engine has its own on its thread, the same policy and code).
    """

    def __init__(self, window: MainWindow, settings: SettingsFlow,
                 mode: Callable[[], Mode], agent: Callable[[], Agent | None] = lambda: None
                 ) -> None:
        self.window = window
        self.settings = settings
        self.mode = mode
        self.agent = agent
        self.context: ContextService | None = None
        self.report: BuildReport | None = None
        self._problem: tuple[str, str] | None = None  # (meter text, why)

    def refresh(self, conv_id: str | None,
                history: Callable[[], list[ConversationMessage]]) -> None:
        """Rebuild the request the next turn would send (cheap: incremental) and show it."""
        self.report, self._problem = None, None
        if conv_id is None or self.context is None:
            return
        if not runtime.is_loaded():
            self.window.usage.set_pending("context: waiting for the model library…")
            return
        try:
            settings = self.settings.llm_settings()
            agent = self.agent()
            if agent is not None and agent.model:
                settings = settings.model_copy(update={"model": agent.model})
            self.report = self.context.build(conv_id, history(), settings, self.mode(),
                                             agent=agent).report
        except BudgetError as e:
            self._problem = ("context: does not fit", self.context.budget_message(e, settings))
        except SettingsError as e:
            self._problem = ("context: settings problem", str(e))
        self.show()

    def draft_tokens(self) -> int:
        text = self.window.composer.text()
        if not text:
            return 0
        if len(text) > EXACT_DRAFT_CHARS or self.context is None or self.report is None:
            return len(text) // 4 + 4
        # Per keystroke: the model comes from the last build, not from settings.json on disk.
        return self.context.counter(self.report.model).text(text) + 4

    def show(self) -> None:
        meter = self.window.usage
        r = self.report
        if r is None:
            if self._problem:
                meter.set_problem(*self._problem)
            return
        draft = round(self.draft_tokens() * r.calibration)
        used = r.provider_estimate + draft
        meter.set_usage(used, r.usable, usage_state(used, r.usable),
                        "\n".join(tooltip_lines(r, draft)))

    def message_fits(self) -> bool:
        """A message the model cannot take even alone: say so instead of sending it."""
        r = self.report
        if r is None:
            return True
        need = round((r.totals["system"] + self.draft_tokens()) * r.calibration)
        if need <= r.usable:
            return True
        self.window.composer.show_warning(
            f"Not sent: this message is about {need:,} tokens with the system prompt, but "
            f"{r.model} accepts {r.usable:,} for input. Shorten it, or choose a model with a "
            "larger context window in Settings.")
        return False

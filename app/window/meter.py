"""The status bar's context meter: the request the next turn would send, against the budget.

The build is the real one (the same `Engine.build` a turn runs, incremental per conversation);
only the draft is recounted on a keystroke, debounced, with the model of the last build.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from PySide6.QtCore import QFileSystemWatcher, QObject, Signal
from shiboken6 import isValid

from app.window import memory
from app.window.long_count import LongDraftCount
from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from core.agents import Agent
from core.attachments import Attachment, user_message
from core.context.builder import BudgetError, BuiltRequest
from core.context.instructions import FILES
from core.context.report import BuildReport
from core.context.report_text import tooltip_html, usage_state
from core.context.service import ProjectContext
from core.cost import cap_refusal, money, prompt_cost, spend
from core.give_way import lower_priority
from core.llm.compat import is_local
from core.llm.tokens import encoding_for_model, encoding_loaded
from core.model import ConversationMessage, Mode
from core.settings import LLMSettings, SettingsError
from core.store.errors import StoreError
from ui.main_window import MainWindow
from ui.throttle import Throttle

INSTRUCTIONS_SETTLE_MS = 300  # AGENTS.md's changes rest this long before it is counted again
EXACT_DRAFT_CHARS = 200_000  # longer drafts are counted on the meter's thread, once
COUNTED_DRAFT_CHARS = 16_000_000  # ... up to this long; longer ones (millions of tokens, over
#                                   any window) stay estimated at 4 characters a token
COUNT_ASIDE = 1500  # a build that must tokenize more entries than this runs off the window
BUILD_ASIDE = 2000  # ... and so does every build of a log this long (a new compaction of it
#                     would hold the window up, and only the build can tell when one is due)

T = TypeVar("T")


CACHE_SAVED = "cache saved"  # what the prompt cache saved in the conversation (a prepared value)
LOCAL = "local"  # the build's server is on this machine or the local network (a prepared value)


class _Relay(QObject):
    """Brings a background count's result back to the window's thread."""

    done = Signal(object)


class UsageMeter:
    """Attributes:
        report: the last build's report (None when there is no conversation or no build).
        context: builds on the window's thread for the meter (set when a project opens; the
            turn engine has its own on its thread, the same policy and code).
    """

    def __init__(self, window: MainWindow, notices: Notices, settings: SettingsFlow,
                 mode: Callable[[], Mode], agent: Callable[[], Agent | None] = lambda: None
                 ) -> None:
        self.window = window
        self.notices = notices
        self.settings = settings
        self._set_in: str | None = None  # where a context window the user set came from
        self.mode = mode
        self.agent = agent
        self.context: ProjectContext | None = None
        self.report: BuildReport | None = None
        self.built: BuiltRequest | None = None  # the request itself (the Inspector's)
        self._problem: tuple[str, str] | None = None  # (meter text, why)
        self._relay = _Relay()
        self._relay.done.connect(self._deliver)
        self._counting = False  # a build runs on the meter's own thread
        # One long-lived thread, not one per count: each new thread gets its own malloc arena,
        # and a big build's memory would stay spread over them.
        self._aside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="meter",
                                         initializer=lower_priority)
        self._again: tuple[str | None, Callable[[], list[ConversationMessage]]] | None = None
        self.listeners: list[Callable[[], None]] = []  # told of each new report (the Inspector)
        # what waits to go with the draft (app/attachment_flow.py)
        self.attached: Callable[[], list[Attachment]] = list
        # whether a turn runs (the controller's): every build then goes beside it
        self.turn_running: Callable[[], bool] = lambda: False
        # Work on each new request that a listener will want, done where the build is done
        # (on the meter's thread for a long log, so the window never waits for it): name ->
        # f(request, log) -> result or None; the results are in `prepared`.
        self.preparers: dict[str, Callable[[BuiltRequest, list[ConversationMessage]], Any]] = {}
        self.prepared: dict[str, Any] = {}
        self.draft_listeners: list[Callable[[int], None]] = []  # told the draft's tokens
        # a long draft's count, made on the meter's thread: ((encoding, length, hash), tokens)
        self._long = LongDraftCount(self.aside, self._long_counted)
        self._last: tuple[str, Callable[[], list[ConversationMessage]]] | None = None
        self._watcher: QFileSystemWatcher | None = None  # the project's AGENTS.md
        # an editor's save is several changes: one count (the throttle and the watcher are
        # the window's: a change after it closed reaches nothing)
        self._instructions_settled = Throttle(self._instructions_changed,
                                              INSTRUCTIONS_SETTLE_MS, window, mode="debounce")

    def _watch(self, context: ProjectContext) -> None:
        """The project's AGENTS.md (or CLAUDE.md), watched: an edit, a new or a removed file
        is counted at once (its requests read it anew anyway)."""
        found = context.instruction_file
        if found is None:
            return
        if self._watcher is None:
            self._watcher = QFileSystemWatcher(self.window)
            self._watcher.fileChanged.connect(lambda _p: self._instructions_settled())
            self._watcher.directoryChanged.connect(lambda _p: self._instructions_settled())
        wanted = [str(found.root)] + [str(found.root / n) for n in FILES
                                      if (found.root / n).is_file()]
        watched = self._watcher.files() + self._watcher.directories()
        if sorted(wanted) != sorted(watched):
            if watched:
                self._watcher.removePaths(watched)
            self._watcher.addPaths(wanted)

    def _instructions_changed(self) -> None:
        if self._last is not None:
            self.refresh(*self._last)

    def preview(self, conv_id: str, messages: list[ConversationMessage],
                usable: int | None) -> BuiltRequest | None:
        """The request `messages` would make with `usable` input tokens (the Inspector's
        budget slider; None: the budget as configured) or with a draft appended: the same
        build, nothing sent, the cache left as it was. None while a build runs on the meter's
        thread (they share the conversation's cache) or without settings.

        Raises:
            BudgetError: not even the system prompt and the latest message fit.
        """
        context = self.context
        if context is None or self._counting:
            return None
        try:
            settings = self.settings.llm_settings()
        except SettingsError:
            return None
        agent = self.agent()
        if agent is not None and agent.model:
            settings = settings.model_copy(update={"model": agent.model})
        if not tokenizer_ready(settings.model):
            return None
        return context.build(conv_id, messages, settings, self.mode(), usable_override=usable,
                             agent=agent, what_if=True, ask_servers=False)

    def refresh(self, conv_id: str | None,
                history: Callable[[], list[ConversationMessage]]) -> None:
        """Rebuild the request the next turn would send (cheap: incremental) and show it.

        A build that must first tokenize thousands of entries (a large conversation opened
        with another model) runs on a thread of its own while the meter says so; so does
        every build while a turn runs (its new tool results make a build shorten and count
        them, beside the engine's own work), however it was asked for: the follow, an
        automatic summary's end, a server that started, a build queued before the turn."""
        if self._counting:  # the running count is for an older state: go again after it
            self._again = (conv_id, history)
            return
        aside = self.turn_running()
        self.report, self._problem, self.built = None, None, None
        context = self.context
        if conv_id is None or context is None:
            return
        self._last = (conv_id, history)
        self._watch(context)
        try:
            settings = self.settings.llm_settings()
        except SettingsError as e:
            self._problem = ("context: settings problem", str(e))
            self.show()
            return
        self._set_in = settings.sources.get("context_window") if settings.context_window else None
        agent = self.agent()
        if agent is not None and agent.model:
            settings = settings.model_copy(update={"model": agent.model})
        try:
            messages = history()
        except StoreError as e:  # gone or unreadable since it was opened (another process)
            self._problem = ("context: conversation not readable", str(e))
            self.show()
            return
        mode = self.mode()

        def build() -> Callable[[], None]:
            try:
                built = context.build(conv_id, messages, settings, mode, agent=agent,
                                      ask_servers=False)  # never wait on a server here
            except BudgetError as e:
                problem = ("context: does not fit", context.budget_message(e, settings))
                return lambda: self._apply(None, problem)
            built.report.decision_counts()  # counted here, not on the window's thread
            prepared = {name: f(built, messages) for name, f in list(self.preparers.items())}
            prepared[CACHE_SAVED] = spend(messages).saved  # for the tooltip (cost_note)
            prepared[LOCAL] = bool(settings.api_base) and is_local(settings.api_base or "")
            return lambda: self._apply(built.report, None, built, prepared)

        # A tokenizer not in yet is half a second of loading: aside too, and before anything
        # asks for the counter (making it loads the tokenizer). litellm is not needed.
        ready = tokenizer_ready(settings.model)
        uncounted = context.uncounted(conv_id, messages, settings.model) if ready else 0
        if uncounted <= COUNT_ASIDE and len(messages) <= BUILD_ASIDE and ready and not aside:
            build()()
            return
        def off_the_window() -> None:
            try:
                apply = build()
            except Exception as e:  # the meter must not stay "counting"
                apply = partial(self._apply, None,
                                ("context: not available", f"The request could not be built: {e}"))
            self._relay.done.emit(apply)

        self._counting = True
        if uncounted > COUNT_ASIDE or context.cold(conv_id, messages):
            # long enough to notice; otherwise the last figure stays until the new one
            self.window.usage.set_pending(f"context: counting {len(messages):,} entries…")
        elif not ready:
            self.window.usage.set_pending("context: loading the tokenizer…")
        self._aside.submit(off_the_window)

    def _apply(self, report: BuildReport | None, problem: tuple[str, str] | None,
               built: BuiltRequest | None = None, prepared: dict[str, Any] | None = None
               ) -> None:
        self.report, self._problem, self.built = report, problem, built
        self.prepared = prepared or {}
        self.show()
        for listener in self.listeners:
            listener()
        if self._counting:
            self._counting = False
            again, self._again = self._again, None
            if again is not None:
                self.refresh(*again)
            else:  # a long build's garbage (its thread's heap) back to the system
                memory.release()

    @property
    def counting(self) -> bool:
        """A build runs on the meter's thread (the figure shown may be an older one)."""
        return self._counting

    def _deliver(self, apply: Callable[[], None]) -> None:
        """A background result, shown unless the window closed while it was made."""
        if isValid(self.window):
            apply()

    def aside(self, work: Callable[[], T], then: Callable[[T | None], None]) -> None:
        """Run `work` on the meter's thread (after the builds queued there) and `then` with
        its result (None if it failed) on the window's: for a listener's work on the request
        that must not stall the window (reading a kept request's copy)."""
        def run() -> None:
            try:
                result: T | None = work()
            except Exception:  # like a failed build: nothing to show
                result = None
            self._relay.done.emit(lambda: then(result))

        self._aside.submit(run)

    def draft_tokens(self) -> int:
        """The draft's tokens, the attachments waiting with it included: the one count of the
        draft, in our counting (`draft_figure` is the one shown). A long draft is counted on
        the meter's thread, once; until then it is estimated (`draft_estimated`)."""
        text = self.window.composer.text()
        attached = sum(a.tokens for a in self.attached())
        if not text:
            return attached + 4 if attached else 0
        if self.context is None or self.report is None:
            return len(text) // 4 + 4 + attached
        # Per keystroke: the model comes from the last build, not from settings.json on disk.
        counter = self.context.counter(self.report.model)
        if len(text) <= EXACT_DRAFT_CHARS:
            return counter.text(text) + 4 + attached
        key = (counter.encoding_name, len(text), hash(text))
        known = self._long.known(key)
        if known is not None:
            return known + 4 + attached
        if len(text) <= COUNTED_DRAFT_CHARS:
            self._long.ask(key, partial(counter.text, text))
        return len(text) // 4 + 4 + attached

    def _long_counted(self) -> None:
        self.show()
        for listener in self.listeners:  # the Inspector's draft, counted as the meter's
            listener()

    def draft_estimated(self) -> bool:
        """The draft's count is an estimate (a long one, not counted yet or too long)."""
        text = self.window.composer.text()
        if len(text) <= EXACT_DRAFT_CHARS or self.context is None or self.report is None:
            return self.report is None and bool(text)
        key = (self.context.counter(self.report.model).encoding_name, len(text), hash(text))
        return self._long.known(key) is None

    def draft_figure(self) -> int:
        """The draft's tokens as every figure is shown: calibrated (the meter, its tooltip,
        the held paste's line, a refusal and the Inspector all show this one)."""
        calibration = self.report.calibration if self.report is not None else 1.0
        return round(self.draft_tokens() * calibration)

    def draft_message(self, text: str, attached: list[Attachment]) -> ConversationMessage:
        """The draft as the next message (the Inspector's what-if), carrying the draft's one
        count: its build counts what the meter shows, and never tokenizes a long draft again
        on the window's thread."""
        if self.context is None or self.report is None:
            return user_message(text, attached)
        encoding = self.context.counter(self.report.model).encoding_name
        return user_message(text, attached, token_counts={encoding: self.draft_tokens()})

    def show(self) -> None:
        meter = self.window.usage
        r = self.report
        if r is None:
            if self._problem:
                meter.set_problem(*self._problem)
            return
        draft = self.draft_figure()
        for listener in self.draft_listeners:
            listener(draft)
        self.window.composer.set_held_tokens(draft, self.draft_estimated())
        used = r.provider_estimate + draft
        meter.set_usage(used, r.usable, usage_state(used, r.usable),
                        tooltip_html(r, draft, self._set_in, self.cost_note(used)))

    def cost_note(self, tokens: int) -> str:
        """The next request's estimated price, and what the provider's cache saved so far in
        this conversation (core.cost)."""
        r = self.report
        if r is None:
            return ""
        estimate = prompt_cost(r.model, tokens)
        if estimate is not None:
            note = f"Next request: about {money(estimate)} for its prompt"
        elif self.prepared.get(LOCAL):
            note = f"Next request: {r.model} runs on a local server (no price)"
        else:
            note = f"Next request: {r.model} has no price in litellm's map (cost unknown)"
        saved = self.prepared.get(CACHE_SAVED) or 0.0
        if saved:
            note += f"; the provider's prompt cache has saved {money(saved)} so far"
        return note + "."

    def within_cap(self, conv_id: str, settings: LLMSettings) -> bool:
        """A spending cap the conversation (or the project) has reached, or that this request
        would pass (core.cost): said, with the figures and the way out, and not sent."""
        r, context = self.report, self.context
        if context is None or (settings.cost_cap is None and settings.project_cost_cap is None):
            return True
        tokens = (r.provider_estimate if r is not None else 0) + self.draft_tokens()
        why = cap_refusal(context.store, conv_id, settings.model, settings.cost_cap,
                          settings.project_cost_cap, tokens)
        if why is None:
            return True
        self.notices.not_sent(f"Not sent: {why}. Raise the cap in Settings → Cost cap to send "
                              "it; your message is kept.")
        return False

    def message_fits(self) -> bool:
        """A message the model cannot take even alone: say so instead of sending it."""
        r = self.report
        if r is None:
            return True
        draft = self.draft_figure()  # the figure the meter and the Inspector show
        need = r.shown(r.totals["system"] + r.totals.get("instructions", 0)) + draft
        if need <= r.usable:
            return True
        about = "about " if self.draft_estimated() else ""
        attached = self.attached()
        if attached:
            big = max(attached, key=lambda a: a.tokens)
            self.notices.not_sent(
                f"Not sent: with its attachments this message alone is {about}{draft:,} tokens "
                f"({big.name}: {r.shown(big.tokens):,}), {need:,} with the system prompt, "
                f"but {r.model} accepts {r.usable:,} for input. Remove an attachment, attach "
                "the part you mean, or choose a model with a larger window in Settings.")
            return False
        self.notices.not_sent(
            f"Not sent: this message alone is {about}{draft:,} tokens, {need:,} with the "
            f"system prompt, but {r.model} accepts {r.usable:,} for input. Shorten it, or "
            "choose a model with a larger context window in Settings.")
        return False


def tokenizer_ready(model: str) -> bool:
    """Counting for `model` can start without loading a BPE file on the window's thread (the
    background import loads them before litellm, which the meter does not need)."""
    return encoding_loaded(encoding_for_model(model))

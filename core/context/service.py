"""The project context: one per open project, owning what every request depends on.

The turn engine, the window's meter, the Context Inspector and `workbench context` all ask the
same `ProjectContext`, so what they show is what is sent: its build caches (and their sticky
views), calibration and the limits and refusals a provider stated (`no_tools`), token
counters, run trackers, and the one log writer. It owns the budget policy: the window is the
smallest of

    what the user set (the conversation's own context_window, else the settings': CLI,
    environment, project, global), what the model's server says (vLLM, llama.cpp, LM Studio,
    Ollama; asked once), and a limit the provider stated when it refused a request (remembered per
    address and model; only when the user set no window: a window the user states wins;
    where a local server states nothing, one counting request it refuses learns it before
    the first turn: `counted_window`)

and only when none of them is known, litellm's model map, else a default.

and one incremental build cache per conversation (a few stay; the least recently built
conversation's cache goes first, so visiting many large conversations does not pile them up).
The window's thread and the engine's build on the same caches: a build holds its cache's lock,
and the sticky view a cache holds for later builds (see core.context.view; saved with the
conversation, so a new process sends the same request) is the same for the meter, the
Inspector and what is sent, because every build has the same fixed prefix and tools.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from core.agents import Agent
from core.approval_seal import ApprovalSeal
from core.attachments import AttachmentStore
from core.context.budget import Budget, model_window, resolve_budget
from core.context.builder import BudgetError, BuildCache, BuiltRequest, build_request
from core.context.calibration import Calibration
from core.context.instructions import InstructionFile, Instructions
from core.context.prompts import PromptComposer
from core.context.server_window import (
    PROBE_MARK,
    PROBE_TOOL,
    cached_window,
    count_prompt,
    count_window,
    server_window,
    unanswered,
)
from core.context.server_window import forget as forget_server
from core.context.view import to_json as view_json
from core.llm import compat
from core.llm.compat import is_local
from core.llm.tokens import REPLY_PRIMER, TokenCounter, encoding_for_model
from core.log_writer import LogWriter
from core.mcp import SEP, McpHub
from core.model import ConversationMessage, Mode
from core.settings import LLMSettings, config_dir
from core.store.conversations import ConversationMeta, ConversationStore
from core.store.project import Project
from core.tool_names import COMPLETE_STEP
from core.tools import Tool, tool_schemas, tools_for
from core.tools.mcp_tools import McpTool, McpToolset
from core.workflows.run_files import RunFiles
from core.workflows.state import RunContext, RunState, RunTracker, replay

CACHED_CONVERSATIONS = 2


def run_tools(mode: Mode, agent: Agent | None, run: RunState | None) -> list[Tool]:
    """The tools a turn in `mode` offers: the mode's, narrowed by the agent and, in run mode,
    by the active step's list; complete_step while a step is active."""
    active = run.active if run is not None and run.open and mode == "run" else None
    return tools_for(mode, agent.tools if agent is not None else None,
                     active.step.tools if active is not None else None,
                     completing=active is not None)


class BuildCaches:
    """The build caches of a project's conversations, the most recently built last; safe to
    share between threads (each cache has a lock its builds hold)."""

    def __init__(self, keep: int = CACHED_CONVERSATIONS) -> None:
        self.keep = keep
        self._caches: OrderedDict[str, BuildCache] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, conv_id: str) -> BuildCache | None:
        return self._caches.get(conv_id)

    def take(self, conv_id: str) -> tuple[BuildCache, threading.Lock]:
        """The conversation's cache (made when missing) and the lock a build holds."""
        with self._lock:
            cache = self._caches.pop(conv_id, None) or BuildCache()
            self._caches[conv_id] = cache
            lock = self._locks.setdefault(conv_id, threading.Lock())
            while len(self._caches) > self.keep:
                gone, _ = self._caches.popitem(last=False)
                self._locks.pop(gone, None)
            return cache, lock


# The counting probe's sample (see ProjectContext._count_probe): prose, a path, code and
# numbers, as requests carry them.
PROBE_SYSTEM = ("You are a careful assistant working in the user's project. Answer briefly and "
                "quote file paths exactly.")
PROBE_TEXT = (
    "Please review src/parser/lexer.py: the tokenizer drops the column of an error after a "
    "tab, so `pytest tests/test_lexer.py -k tabs` fails with AssertionError: 17 != 13. "
    "Here is the function:\n\ndef column(line: str, index: int) -> int:\n    return "
    "len(line[:index].expandtabs(4)) + 1\n\nKeep the public API unchanged, and tell me "
    "which of the 3 call sites in src/parser/errors.py need the new width (8, not 4).")


class ProjectContext:
    """Attributes:
        store: the project's conversations (for each conversation's own settings and history).
        composer: the system prompt templates (with the project's overrides).
        calibration: per-model calibration, and what providers stated (limits, tool refusals).
        writer: the one log writer of the project's conversations.
        offer_tools: requests offer the mode's tools (the project has a folder to run them in).
    """

    def __init__(
        self,
        store: ConversationStore,
        composer: PromptComposer | None = None,
        calibration: Calibration | None = None,
        counter_for: Callable[[str | None], TokenCounter] = TokenCounter.for_model,
        offer_tools: bool = False,
        state_dir: Path | None = None,
        seal: ApprovalSeal | None = None,
        instructions: InstructionFile | None = None,
        attachments: AttachmentStore | None = None,
        mcp: McpHub | None = None,
    ) -> None:
        """`state_dir`: the project's `.workbench/` (where run files are kept), if any;
        `seal`: the user's seal on remembered allowances (default: the one in their config
        folder); `instructions`: the project's AGENTS.md, if it has a folder; `attachments`:
        where its images are kept (core.attachments)."""
        self.offer_tools = offer_tools
        self.instruction_file = instructions
        self.attachments = attachments
        self.mcp = mcp  # the project's MCP servers (core.mcp), if it has any configured
        self._mcp_tools = McpToolset(mcp) if mcp is not None else None
        self.store = store
        self.composer = composer or PromptComposer()
        self.calibration = calibration
        self._counter_for = counter_for
        self._counters: dict[str, TokenCounter] = {}
        self.caches = BuildCaches()
        self._no_tools: set[str] = set()  # without a calibration file: this process only
        self._runs: dict[str, RunTracker] = {}
        self._runs_lock = threading.Lock()
        self.writer = LogWriter(store, self.run_state,
                                RunFiles(state_dir).sync if state_dir is not None else None,
                                seal or ApprovalSeal.in_folder(config_dir()))

    @classmethod
    def for_project(cls, project: Project, calibration: Calibration | None = None
                    ) -> ProjectContext:
        """The one context of an open project (its prompt overrides, the shared calibration,
        its run files): made once when the project opens and handed to everything that
        builds a request or writes to the log."""
        return cls(project.conversations, PromptComposer(project.state / "prompts"),
                   calibration, offer_tools=True,
                   state_dir=None if project.read_only else project.state,
                   instructions=InstructionFile(project.root),
                   attachments=AttachmentStore.of(project.state, project.read_only),
                   mcp=McpHub.for_project(project.root, project.state, config_dir(),
                                              project.trusted_servers()))

    def refuses_tools(self, model: str) -> bool:
        """A server refused a request of `model` that offered tools: no build offers them."""
        return model in self._no_tools or (
            self.calibration is not None and self.calibration.refuses_tools(model))

    def remember_refuses_tools(self, model: str) -> None:
        self._no_tools.add(model)
        if self.calibration is not None:
            self.calibration.remember_refuses_tools(model)

    def counter(self, model: str | None) -> TokenCounter:
        enc = encoding_for_model(model)
        if enc not in self._counters:
            self._counters[enc] = self._counter_for(model)
        return self._counters[enc]

    def budget(self, conv_id: str | None, settings: LLMSettings,
               usable_override: int | None = None, known_window: int | None = None,
               ask_servers: bool = True, meta: ConversationMeta | None = None) -> Budget:
        """The budget for the conversation's next request (the policy in the module's doc).
        `ask_servers=False` on the window's thread: only what a server already said is used
        (the engine's thread asks). `meta`: the conversation's, when already read."""
        window = settings.context_window
        if conv_id is not None:
            meta = meta or self.store.meta(conv_id)
            window = meta.context_window or window  # the most specific
        if known_window is None and self.calibration is not None and not window:
            # a limit learned from this server's refusal; a window the user stated wins
            known_window = self.calibration.window(settings.model, settings.api_base)
        served = took = None
        if usable_override is None:  # the smallest stated figure applies (see resolve_budget)
            served = self.served_window(settings, ask_servers)
            if not (window or served or known_window):  # nothing says it: a count tells
                known_window, took = self.counted_window(settings, ask_servers)
        factor = self.calibration.factor(settings.model) if self.calibration else 1.0
        return resolve_budget(settings.model, settings.max_output_tokens,
                              window_override=window, known_window=known_window,
                              server_window=served, usable_override=usable_override,
                              calibration=factor, took=took)

    def served_window(self, settings: LLMSettings, ask: bool = True) -> int | None:
        """The window the model's server states (see server_window): asked once per server and
        model and remembered beside the calibration, so neither a new window nor a CLI command
        asks again; `forget_served_window` after a failed request makes it asked anew.
        `ask=False`: what is known, without the network."""
        base, model = settings.api_base, settings.model
        if not base:
            return None
        self.sync_profile(settings)
        if self.calibration is not None:
            known, tokens = self.calibration.probed(base, model)
            if known:
                return tokens
        if not ask:
            return cached_window(base, model)
        tokens = server_window(base, model)
        if is_local(base) and compat.busy(base, model):
            return tokens  # an answer is under way there: a later build counts, never cutting it
        if self.calibration is not None and not unanswered(base, model):
            counted = self._count_probe(base, model) if is_local(base) else None
            self.calibration.remember_probe(base, model, tokens, counted)
        return tokens

    def counted_window(self, settings: LLMSettings, ask: bool = True
                       ) -> tuple[int | None, int | None]:
        """Where the model's server states no window and nothing else says it (no window set,
        none learned, unknown to litellm): what one count over the window assumed tells
        (server_window.count_window), asked once per local server and model, never while it
        answers. A refusal names the window: kept as one learned from a refusal is (per
        server; a window the user states wins; `forget-window` drops it). A count it took
        shows the window is larger than the one assumed: kept too, so it is never read twice
        (reading a prompt that long is the cost, minutes on a CPU). Returns (the window
        named, the tokens it took). `ask=False`: what is known, without the network."""
        base, model = settings.api_base, settings.model
        if not base or self.calibration is None or not is_local(base) or model_window(model):
            return None, None
        asked, took = self.calibration.window_count(base, model)
        if asked or not ask or compat.busy(base, model) or unanswered(base, model):
            return None, took
        found = count_window(base, model)
        if found is None:  # not reached, or its turn did not come: a later build asks
            return None, None
        if found.window:
            self.calibration.remember_window(model, found.window, base)
        self.calibration.remember_window_count(base, model, found.took)
        return found.window, found.took

    def sync_profile(self, settings: LLMSettings) -> None:
        """What the server showed it needs (core.llm.compat), remembered beside its window:
        taken from the calibration file by a new process, written there once learned."""
        base, model = settings.api_base, settings.model
        if not base or self.calibration is None:
            return
        learned = compat.learned(base, model)
        if learned is None:
            remembered = self.calibration.profile(base, model)
            if remembered:
                compat.seed(base, model, remembered)
        else:
            self.calibration.remember_profile(base, model, learned)

    def _count_probe(self, base: str, model: str) -> bool | None:
        """A local server's own count of a sample request, once: a count to calibrate
        against from the start (llama.cpp's server streams no usage, so no answer brings
        one), and whether it counts the tools at all (a chat template with no place for them
        leaves them out: they then cost nothing, and the model never sees them). Returns
        whether tools are counted, None when the server would not say."""
        messages = [{"role": "system", "content": PROBE_SYSTEM},
                    {"role": "user", "content": f"{PROBE_MARK} {PROBE_TEXT}"}]
        plain = count_prompt(base, model, messages)
        if plain is None:
            return None
        counter = self.counter(model)
        ours = sum(counter.openai_message(m) for m in messages) + REPLY_PRIMER
        if self.calibration is not None:
            self.calibration.observe(model, ours, plain)
        offered = count_prompt(base, model, messages, [PROBE_TOOL])
        if offered is None:
            return None
        return offered - plain >= counter.text(json.dumps(PROBE_TOOL)) // 4

    def tools_counted(self, settings: LLMSettings) -> bool:
        return self.calibration is None or \
            self.calibration.tools_counted(settings.api_base, settings.model)

    def forget_served_window(self, settings: LLMSettings) -> None:
        if settings.api_base:
            forget_server(settings.api_base, settings.model)
            if self.calibration is not None:
                self.calibration.forget_probe(settings.api_base, settings.model)

    def build(
        self, conv_id: str | None, history: list[ConversationMessage], settings: LLMSettings,
        mode: Mode = "chat", usable_override: int | None = None,
        known_window: int | None = None, run_context: RunContext | None = None,
        agent: Agent | None = None, what_if: bool = False, ask_servers: bool = True,
    ) -> BuiltRequest:
        """The request for `history` (the conversation's log, or what a Retry would resend).

        With `conv_id`, the candidates of the previous build are reused, so a build after an
        append only looks at what is new. `what_if`: a build that is never sent (the
        Inspector's budget slider, or its preview with the draft); it works on a copy of the
        cache, so the real builds' cache and sticky view stay as they were.
        `ask_servers=False`: see `budget`.

        Raises:
            BudgetError: not even the system prompt and the latest user message fit.
        """
        meta = self.store.meta(conv_id) if conv_id is not None else None
        budget = self.budget(conv_id, settings, usable_override, known_window, ask_servers, meta)
        instructions, found, instructions_note = self.project_instructions(meta)
        run = self.run_state(conv_id, history, remember=not what_if) if mode == "run" else None
        if run_context is None and run is not None and run.status != "aborted":
            run_context = run.context()
        tools = [] if self.refuses_tools(settings.model) else \
            self.tool_schemas(mode, agent, run, meta)
        persona = agent.instructions if agent is not None else None
        cache, lock = self.caches.take(conv_id) if conv_id is not None else (None, nullcontext())
        with lock:
            if what_if and cache is not None:  # a draft, or another budget: the cache stays
                cache = cache.fork()
            disk_view = None
            if conv_id is not None and cache is not None and not what_if and \
                    cache.view is None and not cache.history:
                disk_view = self.store.read_view(conv_id)  # a new process: the view saved
            before = cache.view if cache is not None else None
            counted = self.tools_counted(settings)
            built = build_request(history, mode, model=settings.model, budget=budget,
                                  counter=self.counter(settings.model), composer=self.composer,
                                  cache=cache, run_context=run_context, tools=tools,
                                  persona=persona, update_view=not what_if,
                                  disk_view=disk_view, count_tools=counted,
                                  instructions=instructions)
            if conv_id is not None and cache is not None and not what_if and \
                    cache.view is not before:  # a new compaction, or none any more
                self.store.write_view(conv_id, view_json(cache.view) if cache.view else None)
        built.report.instructions, built.report.instructions_note = found, instructions_note
        built.report.tools_off = list(meta.tools_off) if meta is not None else []
        self._say_counts(built, settings, usable_override is None, bool(tools) and not counted)
        return built

    def project_instructions(self, meta: ConversationMeta | None
                             ) -> tuple[Instructions | None, str, str]:
        """The project's instructions a build of the conversation (`meta`) sends, the file's
        name ("" when the project has none) and what the user is told about them: turned off
        here, cut, or why the file is not used."""
        if self.instruction_file is None:
            return None, "", ""
        found = self.instruction_file.current()
        if found is None:
            return None, "", self.instruction_file.problem
        if meta is not None and not meta.project_instructions:
            return None, found.name, "turned off for this conversation"
        return found, found.name, found.notice

    def _say_counts(self, built: BuiltRequest, settings: LLMSettings, calibrated: bool,
                    tools_left_out: bool) -> None:
        """What the report's figures rest on, and tools the server does not read."""
        if self.calibration is not None and calibrated:
            built.report.calibration_basis = self.calibration.basis(settings.model)
        if tools_left_out:
            said = built.report.budget_note
            left_out = ("The server leaves the tools out of the prompt (its chat template has no "
                        "place for them): they cost nothing here, and the model cannot call them.")
            built.report.budget_note = f"{said.rstrip('.')}. {left_out}" if said else left_out

    def tool_schemas(self, mode: Mode, agent: Agent | None = None,
                     run: RunState | None = None, meta: ConversationMeta | None = None
                     ) -> list[dict[str, Any]]:
        """The `tools[]` a request in `mode` offers (none when this service's engine cannot
        run tools); in run mode, those of the active step of `run`, and complete_step."""
        if not self.offer_tools:
            return []
        return tool_schemas(self.tools(mode, agent, run, meta))

    def tools(self, mode: Mode, agent: Agent | None = None, run: RunState | None = None,
              meta: ConversationMeta | None = None) -> list[Tool]:
        """The tools a turn offers: ours (run_tools), then the MCP servers' in agent and run
        mode (in their fixed order; an agent's or a step's list narrows them too), less those
        the conversation switched off (`tools_off`: a tool's name, or `server__*`); the
        runner of the turn gets the same list."""
        ours = run_tools(mode, agent, run)
        if mode == "chat" or self._mcp_tools is None:
            return ours
        extra = self._mcp_tools.tools()
        if agent is not None and agent.tools is not None:
            extra = [t for t in extra if t.name in agent.tools]
        active = run.active if run is not None and run.open and mode == "run" else None
        if active is not None and active.step.tools is not None:
            extra = [t for t in extra if t.name in active.step.tools]
        off = set(meta.tools_off) if meta is not None else set()
        extra = [t for t in extra if t.name not in off  # a tool's switch, or its server's
                 and not (isinstance(t, McpTool) and t.info is not None
                          and f"{t.info.server}{SEP}*" in off)]
        if ours and ours[-1].name == COMPLETE_STEP:  # complete_step stays last
            return [*ours[:-1], *extra, ours[-1]]
        return [*ours, *extra]

    def run_state(self, conv_id: str | None,
                  history: list[ConversationMessage] | None = None,
                  remember: bool = True) -> RunState | None:
        """The state of the conversation's latest run, as its log says (replayed only over
        what is new since the last call for `conv_id`): a snapshot, which the engine's thread
        and the window's may each read while the other replays. `history`: the log (read from the
        store when not given). `remember=False`: `history` is not the log (a what-if build
        with a draft)."""
        if conv_id is None:
            return replay(history or [])
        if history is None:
            history = self.store.load(conv_id).messages
        with self._runs_lock:
            tracker = self._runs.setdefault(conv_id, RunTracker())
            state = tracker.state(history, remember)
            return state.snapshot() if state is not None and remember else state

    def preview(self, conv_id: str, settings: LLMSettings, mode: Mode = "chat",
                usable_override: int | None = None, agent: Agent | None = None
                ) -> BuiltRequest:
        """The request the conversation's next turn would send, as it stands on disk."""
        history = self.store.load(conv_id).messages
        return self.build(conv_id, history, settings, mode, usable_override, agent=agent)

    def message_room(self, conv_id: str, settings: LLMSettings, mode: Mode = "chat",
                     agent: Agent | None = None) -> int:
        """The tokens a new message may take in the conversation's next request: the usable
        budget less what every request carries (the history can be compacted; this cannot).

        Raises:
            BudgetError: not even the prefix fits.
        """
        report = self.preview(conv_id, settings, mode, agent=agent).report
        fixed = sum(report.totals.get(k, 0) for k in ("system", "instructions", "tools"))
        return report.usable - fixed - REPLY_PRIMER

    def uncounted(self, conv_id: str, history: list[ConversationMessage], model: str) -> int:
        """How many entries the next build of `conv_id` would have to tokenize: those past
        what its cache already holds, without a stored count in the model's encoding (after a
        model change, every entry of the log)."""
        enc = self.counter(model).encoding_name
        cache = self.caches.get(conv_id)
        start = 0
        if cache is not None and cache.encoding == enc and cache.history and \
                len(history) >= len(cache.history) and \
                history[len(cache.history) - 1] is cache.history[-1]:
            start = len(cache.history)
        return sum(1 for m in history[start:] if enc not in m.token_counts)

    def cold(self, conv_id: str, history: list[ConversationMessage]) -> bool:
        """The next build of `conv_id` starts from nothing (no cache for this log): on a long
        log, with compaction, it is the slow one."""
        cache = self.caches.get(conv_id)
        return cache is None or not cache.history or len(history) < len(cache.history) or \
            history[len(cache.history) - 1] is not cache.history[-1]

    def budget_message(self, e: BudgetError, settings: LLMSettings) -> str:
        """Why nothing fits, with the way out when a remembered provider limit is the cause."""
        remembered = self.calibration.window(settings.model, settings.api_base) \
            if self.calibration and not settings.context_window else None
        if remembered is None:
            return str(e)
        return (f"{e} The window assumed is {remembered:,} tokens, a limit the provider stated "
                "earlier for this model; if that is wrong, reset it in Settings or with "
                "`workbench forget-window PROJECT`, or state the window (--context-window).")

"""How many tokens a request may use: the model's window less the reserved output and a margin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_WINDOW = 8192  # for models litellm does not know: small on purpose, and said so
SAFETY_FRACTION = 0.02
MIN_SAFETY = 128


class BudgetError(ValueError):
    """Even the minimum (system prefix and the latest user message) does not fit. `parts`:
    what that minimum is made of, (what, tokens, what to do about it), so the message names
    what does not fit (a long AGENTS.md, a workflow's directive) rather than blaming the
    message."""

    def __init__(self, needed: int, usable: int,
                 parts: Sequence[tuple[str, int, str]] = ()) -> None:
        self.needed = needed
        self.usable = usable
        self.parts = [p for p in parts if p[1] > 0]
        super().__init__(
            f"This request needs at least {needed:,} tokens ({self.what}), but only "
            f"{usable:,} are available for input. {self.advice}")

    @property
    def what(self) -> str:
        """The minimum's parts with their tokens, largest first."""
        if not self.parts:
            return "the system prompt and your latest message"
        return "; ".join(f"{what} {tokens:,}" for what, tokens, _ in
                         sorted(self.parts, key=lambda p: -p[1]))

    @property
    def advice(self) -> str:
        """What to do: shorten the largest part, or a larger window."""
        do = max(self.parts, key=lambda p: p[1])[2] if self.parts else "Shorten the message"
        return f"{do}, or choose a model with a larger context window."


@dataclass(frozen=True)
class Budget:
    """Attributes:
    window: the model's input limit in tokens.
    reserved_output: kept free for the answer (max output tokens).
    safety: margin for counting differences between us and the provider.
    source: where `window` came from: "override" (conversation or settings), "server" (the
        server said), "provider" (stated in an overflow error), "litellm", "default", or
        "budget" (a usable budget asked for directly: a preview, --budget).
    note: a sentence for the user when the figure is a guess.
    """

    window: int
    reserved_output: int
    safety: int
    source: str
    note: str | None = None
    calibration: float = 1.0  # provider tokens per token of ours, learnt from past calls

    @property
    def usable(self) -> int:
        return max(0, self.window - self.reserved_output - self.safety)

    @property
    def usable_ours(self) -> int:
        """The usable budget in our own (uncalibrated) counting, what trimming compares to."""
        return int(self.usable / self.calibration) if self.calibration > 0 else self.usable


def model_window(model: str) -> int | None:
    """litellm's `max_input_tokens` for the model, or None when it does not know it (read
    from its model map without importing litellm: see core.llm.model_map)."""
    from core.llm.model_map import model_info

    info = model_info(model)
    value = (info.get("max_input_tokens") or info.get("max_tokens")) if info else None
    return int(value) if value else None


def resolve_budget(
    model: str,
    max_output_tokens: int,
    *,
    window_override: int | None = None,
    usable_override: int | None = None,
    known_window: int | None = None,
    server_window: int | None = None,
    calibration: float = 1.0,
    took: int | None = None,
) -> Budget:
    """The budget for one build.

    `usable_override` (the CLI's --budget) sets the usable input budget directly. Otherwise the
    window is the smallest of what the user set (`window_override`), what the server says of
    its model (`server_window`) and a limit the provider itself stated in a refusal
    (`known_window`): a request built for more than the provider takes is refused again. Only
    when none is known does litellm's map (or a small default) decide. `took`: a count of that
    many tokens the server took without refusing (its window is larger than the default).
    """
    if usable_override is not None:
        # (not "override": that is a window the user set, and this is no window at all)
        return Budget(usable_override, 0, 0, "budget", calibration=calibration)
    stated = [(v, source) for v, source in ((window_override, "override"),
                                            (server_window, "server"),
                                            (known_window, "provider")) if v]
    note: str | None = None
    if stated:
        window, source = min(stated, key=lambda s: s[0])  # a tie keeps the user's own figure
        if source != "override":
            said = ("the server says its model takes" if source == "server" else
                    "the provider stated a limit of")
            note = f"{said} {window:,} tokens for {model}"
            if window_override:
                note += (f", fewer than the {window_override:,} set in Settings: requests are "
                         "built to fit it")
            elif source == "server":
                note = None  # the usual case for a local server: nothing to point out
    else:
        found = model_window(model)
        if found:
            window, source = found, "litellm"
        else:
            window, source = DEFAULT_WINDOW, "default"
            note = (f"neither litellm nor a server says how long a context {model!r} takes; "
                    f"assuming {DEFAULT_WINDOW:,} tokens. If its window is smaller or larger, "
                    "set it (Settings → Context window, --context-window, or "
                    "WORKBENCH_CONTEXT_WINDOW); a server that refuses a longer request "
                    "teaches it on its own.")
            # A count it took says the window is at least `took`, no more: just over the
            # default by design (count_window), so the plan stays the default's.
            if took and took >= DEFAULT_WINDOW:
                note = (f"the server states no window for {model!r}, but took a count of "
                        f"{took:,} tokens: its window is larger than the {DEFAULT_WINDOW:,} "
                        "assumed. To use more of it, set it (Settings → Context window, "
                        "--context-window, or WORKBENCH_CONTEXT_WINDOW).")
    # A guessed window keeps more of itself for the request: half of 8,192 reserved for an
    # answer left a whole agent session under 4,000 tokens.
    reserved = min(max_output_tokens, window // (4 if source == "default" else 2))
    safety = max(MIN_SAFETY, int(window * SAFETY_FRACTION))
    return Budget(window, reserved, safety, source, note, calibration)

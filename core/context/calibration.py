"""Per-model calibration: our token count against what the provider reports it billed.

After each call we know our count for the request and the provider's `usage.prompt_tokens`
(or, for a refused request, the count its refusal states). Their ratio, smoothed, scales the
budget for the next build, so the meter matches the provider even where tiktoken only estimates
(non-OpenAI models). Only counts the provider itself reported are learnt from: a stream without
usage, which litellm counts itself, is counted as such, and a ratio no tokenizer would give is
set aside. Kept in the config folder.
"""

from __future__ import annotations

import threading
from pathlib import Path

from core.store.fileio import atomic_write_json, read_json

SMOOTHING = 0.3  # weight of the newest observation
LIMITS = (0.5, 2.0)  # a ratio outside these is a counting bug, not a calibration
MIN_TOKENS = 50  # tiny requests say little about the ratio


class Calibration:
    """The figures in memory behind `_lock`, held only while they are read or changed; the
    file written after, in order, behind `_writing` (an fsync on a busy disk takes a while,
    and every build, the meter's on the window's thread, reads the figures)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._data: dict[str, dict[str, float]] | None = None
        self._unwritten: dict[str, dict[str, float]] | None = None  # the newest, to write

    def _load(self) -> dict[str, dict[str, float]]:
        if self._data is None:
            try:
                raw = read_json(self.path)
                self._data = raw if isinstance(raw, dict) else {}
            except (OSError, ValueError):
                self._data = {}
        return self._data

    def factor(self, model: str) -> float:
        with self._lock:
            entry = self._load().get(model)
            return float(entry["factor"]) if entry and "factor" in entry else 1.0

    def window(self, model: str, api_base: str | None = None) -> int | None:
        """A context limit the provider itself stated for `model` (from an overflow error):
        the server's at `api_base` (a limit learned from one server is not another's)."""
        with self._lock:
            value = self._load().get(_window_key(model, api_base))
            return int(value["tokens"]) if isinstance(value, dict) and "tokens" in value \
                else None

    def remembered_windows(self) -> dict[str, int]:
        """Every context limit a provider stated, by model or `<address>|<model>` (shown in
        Settings; `forget_window` takes the same names)."""
        with self._lock:
            return {key.removeprefix("window:"): int(value["tokens"])
                    for key, value in self._load().items()
                    if key.startswith("window:") and isinstance(value, dict) and "tokens" in value}

    def forget_window(self, model: str, api_base: str | None = None) -> bool:
        """Drop the limit remembered for `model` at `api_base` (the user found it wrong), with
        what its server said of it (asked again); `model` may be a name `remembered_windows`
        gave. True when there was anything to forget."""
        if api_base is None and "|" in model:
            api_base, model = model.rsplit("|", 1)
        with self._lock:
            data = self._load()
            keys = [_window_key(model, api_base), f"no_tools:{model}"]
            if api_base:
                keys += [_probe_key(api_base, model), _profile_key(api_base, model),
                         _count_key(api_base, model)]
            else:  # the model wherever it is served
                keys += [k for k in data if k.startswith(("probe:", "profile:", "window:",
                                                          "counted:"))
                         and k.endswith(f"|{model}")]
            found = [k for k in keys if k in data]
            for key in found:
                del data[key]
            if found:
                self._changed(data)
        self._flush()
        return bool(found)

    def refuses_tools(self, model: str) -> bool:
        """The model's server refused a request that offered tools (remembered, so every
        build, the meter's as the engine's, leaves them out)."""
        with self._lock:
            return bool(self._load().get(f"no_tools:{model}"))

    def remember_refuses_tools(self, model: str) -> None:
        with self._lock:
            data = self._load()
            data[f"no_tools:{model}"] = {"refused": 1.0}
            self._changed(data)
        self._flush()

    def remember_window(self, model: str, tokens: int, api_base: str | None = None) -> None:
        with self._lock:
            data = self._load()
            data[_window_key(model, api_base)] = {"tokens": tokens}
            self._changed(data)
        self._flush()

    def probed(self, api_base: str, model: str) -> tuple[bool, int | None]:
        """What the server at `api_base` said of `model`'s window when last asked: (asked,
        tokens); tokens None when it did not say."""
        with self._lock:
            entry = self._load().get(_probe_key(api_base, model))
        if not isinstance(entry, dict):
            return False, None
        return True, int(entry.get("tokens") or 0) or None

    def tools_counted(self, api_base: str | None, model: str) -> bool:
        """False when the server's own counts showed it leaves the tools out of the prompt
        (llama-cpp-python with a chat template that has no place for them)."""
        if not api_base:
            return True
        with self._lock:
            entry = self._load().get(_probe_key(api_base, model))
        return not isinstance(entry, dict) or entry.get("tools_counted", 1.0) != 0.0

    def remember_probe(self, api_base: str, model: str, tokens: int | None,
                       tools_counted: bool | None = None) -> None:
        with self._lock:
            data = self._load()
            entry = {"tokens": float(tokens or 0)}
            if tools_counted is not None:
                entry["tools_counted"] = float(tools_counted)
            data[_probe_key(api_base, model)] = entry
            self._changed(data)
        self._flush()

    def window_count(self, api_base: str, model: str) -> tuple[bool, int | None]:
        """Whether the server at `api_base` was asked to count a prompt over the window assumed
        for `model` (core.context.server_window.count_window), and the tokens it took without
        refusing (None: it refused, its window kept as a learned `window`, or said nothing)."""
        with self._lock:
            entry = self._load().get(_count_key(api_base, model))
        if not isinstance(entry, dict):
            return False, None
        return True, int(entry.get("took") or 0) or None

    def remember_window_count(self, api_base: str, model: str, took: int | None) -> None:
        with self._lock:
            data = self._load()
            data[_count_key(api_base, model)] = {"took": float(took or 0)}
            self._changed(data)
        self._flush()

    def profile(self, api_base: str, model: str) -> dict[str, float] | None:
        """What the server at `api_base` showed it needs for `model` (core.llm.compat)."""
        with self._lock:
            entry = self._load().get(_profile_key(api_base, model))
        return dict(entry) if isinstance(entry, dict) else None

    def remember_profile(self, api_base: str, model: str, values: dict[str, float]) -> None:
        with self._lock:
            data = self._load()
            key = _profile_key(api_base, model)
            if data.get(key) == values:
                return
            data[key] = dict(values)
            self._changed(data)
        self._flush()

    def forget_probe(self, api_base: str, model: str) -> None:
        with self._lock:
            data = self._load()
            if data.pop(_probe_key(api_base, model), None) is not None:
                self._changed(data)
        self._flush()

    def observe(self, model: str, ours: int, theirs: int) -> float:
        """Take in one count the provider reported for a request of ours; returns the factor.
        A ratio outside LIMITS is a counting bug on one side (or a count that was not the
        provider's), not a calibration: it is set aside and counted, never clamped in."""
        if ours < MIN_TOKENS or theirs <= 0:
            return self.factor(model)
        ratio = theirs / ours
        with self._lock:
            data = self._load()
            entry = dict(data.get(model) or {})
            if not LIMITS[0] <= ratio <= LIMITS[1]:
                entry["discarded"] = int(entry.get("discarded", 0)) + 1
            elif "factor" not in entry:
                entry.update(factor=ratio, samples=1)
            else:
                entry.update(factor=(1 - SMOOTHING) * float(entry["factor"]) + SMOOTHING * ratio,
                             samples=int(entry.get("samples", 0)) + 1)
            data[model] = entry
            self._changed(data)
        self._flush()
        return float(entry.get("factor", 1.0))

    def observe_unreported(self, model: str) -> None:
        """An answer came with no usage from the provider (counted, to say why the figures
        are not calibrated)."""
        with self._lock:
            data = self._load()
            entry = dict(data.get(model) or {})
            entry["unreported"] = int(entry.get("unreported", 0)) + 1
            data[model] = entry
            self._changed(data)
        self._flush()

    def basis(self, model: str) -> str:
        """What the figures shown for `model` rest on, in one line (the Inspector, the meter's
        tooltip and `workbench context` say it)."""
        with self._lock:
            entry = self._load().get(model) or {}
        samples, unreported = int(entry.get("samples", 0)), int(entry.get("unreported", 0))
        discarded = int(entry.get("discarded", 0))
        if samples:
            line = (f"calibrated x{float(entry['factor']):.3f} from {samples:,} count"
                    f"{'s' if samples != 1 else ''} the provider reported")
            if unreported:
                line += " (its answers bring no usage)"
        elif unreported:
            line = ("our own count (tiktoken): the server reports no usage, so there is "
                    "nothing to calibrate against")
        else:
            line = "our own count (tiktoken): no count from the provider yet"
        if discarded:
            line += (f"; {discarded:,} implausible ratio{'s' if discarded != 1 else ''} "
                     "set aside")
        return line

    def _changed(self, data: dict[str, dict[str, float]]) -> None:
        """(Under `_lock`.) The figures as they are now are the next to be written."""
        self._unwritten = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}

    def _flush(self) -> None:
        """Write the newest figures, outside `_lock`; returns once they are on disk (a write
        that a later change overtook finds them written already by the one before it)."""
        with self._writing:
            with self._lock:
                data, self._unwritten = self._unwritten, None
            if data is None:
                return
            try:
                atomic_write_json(self.path, data)
            except OSError:
                pass  # calibration is a nicety: never fail a turn over it


def _probe_key(api_base: str, model: str) -> str:
    return f"probe:{api_base.rstrip('/')}|{model}"


def _count_key(api_base: str, model: str) -> str:
    return f"counted:{api_base.rstrip('/')}|{model}"


def _profile_key(api_base: str, model: str) -> str:
    return f"profile:{api_base.rstrip('/')}|{model}"


def _window_key(model: str, api_base: str | None) -> str:
    return f"window:{api_base.rstrip('/')}|{model}" if api_base else f"window:{model}"

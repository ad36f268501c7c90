"""Conversations that tests make themselves (no dependency on ../shared)."""

from __future__ import annotations

import json
import random
from typing import Any


def make_conversation(rounds: int, seed: int = 0, tool_output_chars: int = 400) -> list[dict[str, Any]]:
    """OpenAI-format messages: user turns, assistant tool calls with results, answers."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    for r in range(rounds):
        out.append({"role": "user", "content": f"Round {r}: please look at src/mod_{r}.py and fix it"})
        if rng.random() < 0.6:
            calls = [
                {"id": f"call_{r}_{k}", "type": "function",
                 "function": {"name": rng.choice(["read_file", "search_files", "run_shell"]),
                              "arguments": json.dumps({"path": f"src/mod_{r}_{k}.py"})}}
                for k in range(rng.randint(1, 3))
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            for c in calls:
                body = "".join(rng.choices("abcdefgh ij\n", k=tool_output_chars))
                out.append({"role": "tool", "tool_call_id": c["id"], "content": body})
        out.append({"role": "assistant", "content": f"Done with round {r}. Changed line {rng.randint(1, 999)}."})
    return out

"""Conversations that tests make themselves (no dependency on ../shared)."""

from __future__ import annotations

import json
import random
from typing import Any

from core.tools.todo import TodoArgs
from core.tools.todo import apply as todo_apply
from core.tools.todo import render as todo_render


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


def make_agent_session(rounds: int, seed: int = 0, output_chars: int = 3000) -> list[Any]:
    """Log entries (ConversationMessage) of an agent session: user requests with constraints,
    files read (long outputs), written and edited, commands with exit codes, a failing command
    and what followed, and a todo list. Tool metadata is set as the engine sets it."""
    from core.model import ConversationMessage as M
    from core.model import ToolCall

    rng = random.Random(seed)
    out: list[Any] = []

    def call(cid: str, name: str, args: dict[str, Any]) -> ToolCall:
        return ToolCall.model_validate({"id": cid, "type": "function",
                                        "function": {"name": name, "arguments": json.dumps(args)}})

    for r in range(rounds):
        out.append(M(role="user", content=f"Task {r}: the parser in pkg/mod_{r}.py must keep "
                                         f"line numbers; never change the public API (rule {r})."))
        path = f"pkg/mod_{r}.py"
        body = "\n".join(f"def f_{r}_{k}(x):  # {rng.random():.6f}" for k in range(output_chars // 30))
        calls = [call(f"c{r}a", "read_file", {"path": path})]
        out.append(M(role="assistant", content=None, tool_calls=calls))
        out.append(M(role="tool", tool_call_id=f"c{r}a", tool_name="read_file", status="ok",
                     content=body))
        verb = "write_file" if r % 2 else "edit_file"
        out.append(M(role="assistant", content=None,
                     tool_calls=[call(f"c{r}b", verb, {"path": path, "content": "x" * 200})]))
        out.append(M(role="tool", tool_call_id=f"c{r}b", tool_name=verb, status="ok",
                     content=f"{path}: 12 lines"))
        code = 1 if r % 5 == 3 else 0
        out.append(M(role="assistant", content=None,
                     tool_calls=[call(f"c{r}c", "run_shell", {"command": f"pytest tests/test_{r}.py"})]))
        log = "\n".join(f"test_{r}_{k} PASSED" for k in range(output_chars // 40))
        if code:
            log += f"\nE   AssertionError: line numbers lost in mod_{r}"
        out.append(M(role="tool", tool_call_id=f"c{r}c", tool_name="run_shell",
                     status="error" if code else "ok", exit_code=code, content=log))
        if r % 4 == 0:  # the plan, in the app's own manage_todo_list calls
            plan = {"action": "set", "items": [f"task {k}" for k in range(r + 2)]}
            out.append(M(role="assistant", content=None,
                         tool_calls=[call(f"c{r}t", "manage_todo_list", plan)]))
            out.append(M(role="tool", tool_call_id=f"c{r}t", tool_name="manage_todo_list",
                         status="ok",
                         content=todo_render(todo_apply([], TodoArgs.model_validate(plan)))))
        out.append(M(role="assistant", content=f"Task {r} done: {path} keeps line numbers "
                                              f"({rng.randint(1, 99)} tests pass)."))
    return out


def agent_session_project(path: Any, rounds: int, seed: int = 0, title: str = "long") -> str:
    """A project folder at `path` holding one conversation of `make_agent_session` (counted);
    returns its id."""
    from core.llm.tokens import TokenCounter
    from core.store.project import Project

    counter = TokenCounter("o200k_base")
    with Project.open(path) as p:
        conv: str = p.conversations.create(title).id
        p.conversations.append_many(conv, [counter.with_count(m)
                                           for m in make_agent_session(rounds, seed=seed)])
        return conv

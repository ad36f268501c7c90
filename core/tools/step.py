"""complete_step: how the model finishes the active step of a run (run mode only).

The call is checked against the run as the log leaves it: there must be an active step, a
result, and one completion per step in one answer (a second call in the same answer would
complete a step whose brief the model has not read yet). A successful result is what marks the
step done: core.workflows.state replays these results, so the log alone says where a run is.
The run it checks against is the one the project context replays (`ToolContext.run`), not a
replay of its own.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from core.tool_names import COMPLETE_STEP
from core.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput


class CompleteStepArgs(ToolArgs):
    result: str = Field(description="What the step produced: the outcome, where it is (files, "
                                    "commands), anything left open. One short paragraph.")

    @field_validator("result")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the result is empty; say what the step produced")
        return value


async def complete_step(args: CompleteStepArgs, ctx: ToolContext) -> ToolOutput:
    state = ctx.run
    active = state.active if state is not None and state.open else None
    if state is None or active is None:
        raise ToolError("No step is active, so there is nothing to complete: "
                        + ("no workflow is running in this conversation." if state is None else
                           f"the run is {state.status}.") + " Carry on answering the user.")
    asked = next((m.step_id for m in reversed(ctx.history)
                  if m.tool_calls and any(c.id == ctx.call_id for c in m.tool_calls)), None)
    if asked is not None and asked != active.step.id:
        raise ToolError(f"The step this call was made for ({asked!r}) is no longer active: the "
                        f"user skipped or redid it. The active step is now "
                        f"{active.step.title!r}; its brief comes with the next request.")
    done = ctx.shared.setdefault(COMPLETE_STEP, [])
    assert isinstance(done, list)
    if done:
        raise ToolError(f"Step {done[0]!r} was already completed by an earlier call in this "
                        "answer. The next step's brief arrives with the next request: work on "
                        "it first, then call complete_step when its done-when condition holds.")
    done.append(active.step.id)
    at = state.steps.index(active)
    following = next((s for s in state.steps[at + 1:] if s.status == "pending"), None) or \
        next((s for s in state.steps if s.status == "pending"), None)  # as the run goes on
    after = (f"Next: step {state.steps.index(following) + 1}, {following.step.title}; its "
             "brief is in the system prompt of the next request." if following is not None
             else "That was the last step: write the wrap-up next.")
    return ToolOutput(f"Step {at + 1} of {len(state.steps)} ({active.step.title}) is done. "
                      f"{after}")


COMPLETE_STEP_TOOL = Tool(
    COMPLETE_STEP,
    "Finish the active step of the workflow once its done-when condition holds, with a short "
    "result. Call it once per step, never for a step you have not finished.",
    CompleteStepArgs, "read", complete_step, key_arg="result")

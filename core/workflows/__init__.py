"""Workflows and the state of a run of one, as pure values: a workflow's steps (`workflow`) and a
run folded from the conversation's log (`state`). Below the engine, the context and the tools,
which all read them; the driver that carries a run on is `core.runs`."""

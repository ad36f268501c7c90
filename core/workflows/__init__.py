"""Workflows and the state of a run of one: a workflow's steps (`workflow`), a run replayed from
the conversation's log (`state`, with the `RunContext` run mode's prefix is written from) and
the run's cache file in `.workbench/runs/` (`run_files`). Below the engine, the context and the
tools, which all read them; the driver that drives a run is `core.runs`."""

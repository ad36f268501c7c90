"""Run mode's driver (`driver`): it starts a run, drives it through its steps and applies the
user's controls, over the engine. What it drives are values below the engine: core.workflows."""

"""Run mode: workflows (`workflow`), a run's state read from the log (`state`), its cache file
(`files`) and the driver that carries a run through its steps (`driver`)."""

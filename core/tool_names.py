"""The names of the built-in tools, as data: what a workflow's step may list and what a run's
replay recognizes, checked below the tools themselves (`core.tools` defines the tools under these
names; a test keeps the two in step)."""

from __future__ import annotations

READ_ONLY_TOOL_NAMES = frozenset({"read_file", "list_dir", "search_files", "read_tool_result"})
BUILTIN_TOOL_NAMES = READ_ONLY_TOOL_NAMES | frozenset(
    {"manage_todo_list", "write_file", "edit_file", "run_shell"})
COMPLETE_STEP = "complete_step"  # run mode only: how the model finishes the active step

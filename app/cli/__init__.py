"""The command line: `workbench` and its commands (parser and entry point in main.py)."""

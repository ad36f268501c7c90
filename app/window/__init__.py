"""The window: started by start.py, wired by controller.py, one flow per feature."""

"""Checkpoints: the project's files around agent turns, listed, diffed and restored."""

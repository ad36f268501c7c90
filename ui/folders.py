"""Where a file dialog opens: the folder the user last chose in a dialog of the same kind, else
the open project's folder (never the folder the app happened to be started from)."""

from __future__ import annotations

from pathlib import Path


class DialogFolders:
    def __init__(self) -> None:
        self.project = ""  # the open project's folder
        self._last: dict[str, str] = {}  # kind -> the folder chosen in last

    def start(self, kind: str, name: str = "") -> str:
        """Where a dialog of `kind` opens; with `name`, that file's path there."""
        folder = self._last.get(kind) or self.project
        return str(Path(folder, name)) if folder and name else (folder or name)

    def chose(self, kind: str, path: str, is_folder: bool = False) -> None:
        """The user chose `path` (a file, or with `is_folder` a folder) in a dialog of `kind`."""
        if path:
            self._last[kind] = path if is_folder else str(Path(path).parent)

"""The main window as the app and its menus see it: the signals it sends, the parts the menus
act on, and the actions the menus make (attributes, so the app and tests reach them by name).

ui/main_window.py builds the window (`MainWindow` is the one subclass); ui/window_menus.py and
ui/help_menu.py fill its menu bar. They take a `WindowBase`, so they need not import the window
that calls them.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMenu

from ui.changes_panel import ChangesPanel
from ui.composer import Composer
from ui.conversation_list import ConversationList
from ui.folders import DialogFolders
from ui.inspector import InspectorPanel
from ui.run_panel import RunPanel
from ui.transcript_view import TranscriptView


class WindowBase(QMainWindow):
    """Signals:
        new_project_requested(str): a folder the user chose for a new project.
        open_project_requested(str): a project folder to open.
        settings_requested(): File > Settings.
        notice_action(): the notice's action button was pressed (e.g. "Save").
        closing(): the window is about to close (save state now).
    """

    new_project_requested = Signal(str)
    open_project_requested = Signal(str)
    settings_requested = Signal()
    notice_action = Signal()
    compact_requested = Signal()
    regenerate_requested = Signal()
    import_requested = Signal(str)  # a file to import as a new conversation
    attach_requested = Signal()  # File → Attach files…
    export_requested = Signal(str, str)  # where to write the open conversation, the format
    theme_chosen = Signal(str)  # View → Theme: "system", "light" or "dark"
    find_requested = Signal(int)  # F3: 1 (the next match of the search), Shift+F3: -1
    closing = Signal()
    trust_requested = Signal()  # File → Trust this project…, or the restricted banner's link
    help_requested = Signal(str)  # Help → "data" (where the data lives) or "about"
    # the parts the menus act on, made by ui/main_window.MainWindow
    folders: DialogFolders
    conversations: ConversationList
    transcript: TranscriptView
    composer: Composer
    inspector: InspectorPanel
    run_panel: RunPanel
    changes_panel: ChangesPanel
    # made by ui/window_menus.build_menus
    new_conversation_action: QAction
    recent_menu: QMenu
    import_action: QAction
    attach_action: QAction
    trust_action: QAction
    compact_action: QAction
    regenerate_action: QAction
    export_action: QAction
    inspector_action: QAction
    run_panel_action: QAction
    theme_actions: dict[str, QAction]
    shortcuts_action: QAction

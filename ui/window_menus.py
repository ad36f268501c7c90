"""The window's menu bar: File, Conversation, View, Edit (their actions are attributes of the
window, so the app and tests reach them by name)."""

from __future__ import annotations

import re
from functools import partial

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu

from ui.help_menu import build_help_menu
from ui.window_base import WindowBase

EXPORT_FILTERS = {"OpenAI messages (*.json)": "openai", "JSONL log, every entry (*.jsonl)": "jsonl",
                  "Markdown (*.md)": "markdown"}


def build_menus(window: WindowBase) -> None:
    file_menu = window.menuBar().addMenu("&File")
    window.new_conversation_action = QAction("&New conversation", window)
    window.new_conversation_action.setShortcut(QKeySequence.StandardKey.New)
    window.new_conversation_action.triggered.connect(window.conversations.new_requested)
    file_menu.addAction(window.new_conversation_action)
    file_menu.addSeparator()
    new_project = QAction("New &project…", window)
    new_project.triggered.connect(partial(_choose_new_project, window))
    file_menu.addAction(new_project)
    open_project = QAction("&Open project…", window)
    open_project.setShortcut(QKeySequence.StandardKey.Open)
    open_project.triggered.connect(partial(_choose_project, window))
    file_menu.addAction(open_project)
    window.recent_menu = QMenu("Open &recent", window)
    file_menu.addMenu(window.recent_menu)
    file_menu.addSeparator()
    window.import_action = QAction("&Import conversation…", window)
    window.import_action.setStatusTip("OpenAI JSON ({\"messages\": [...]} or [...]) or a "
                                    "JSONL log; or drop the file on the list")
    window.import_action.triggered.connect(partial(_choose_import, window))
    file_menu.addAction(window.import_action)
    window.attach_action = QAction("&Attach files…", window)
    window.attach_action.setShortcut(QKeySequence("Ctrl+Shift+A"))
    window.attach_action.setStatusTip("Send files or images with the next message (or drop "
                                      "them on the message box, or paste a screenshot)")
    window.attach_action.triggered.connect(window.attach_requested)
    file_menu.addAction(window.attach_action)
    window.trust_action = QAction("&Trust this project…", window)
    window.trust_action.setStatusTip("Review what the project ships that acts on your behalf "
                                     "(MCP commands, where requests go) and trust it")
    window.trust_action.setEnabled(False)
    window.trust_action.triggered.connect(window.trust_requested)
    file_menu.addAction(window.trust_action)
    file_menu.addSeparator()
    settings = QAction("&Settings…", window)
    settings.setShortcut(QKeySequence("Ctrl+,"))
    settings.triggered.connect(window.settings_requested)
    file_menu.addAction(settings)
    file_menu.addSeparator()
    quit_action = QAction("&Quit", window)
    quit_action.setShortcut(QKeySequence.StandardKey.Quit)
    quit_action.triggered.connect(window.close)
    file_menu.addAction(quit_action)

    conversation = window.menuBar().addMenu("&Conversation")
    window.compact_action = QAction("&Compact now…", window)
    window.compact_action.setShortcut(QKeySequence("Ctrl+Shift+M"))
    window.compact_action.setStatusTip("Summarize the older history (also: /compact [focus] "
                                     "in the message box)")
    window.compact_action.triggered.connect(window.compact_requested)
    conversation.addAction(window.compact_action)
    window.regenerate_action = QAction("&Regenerate the last answer", window)
    window.regenerate_action.setShortcut(QKeySequence("Ctrl+Shift+R"))
    window.regenerate_action.setStatusTip("Ask again in a new branch; this one stays as it is")
    window.regenerate_action.triggered.connect(window.regenerate_requested)
    conversation.addAction(window.regenerate_action)
    window.export_action = QAction("&Export…", window)
    window.export_action.setShortcut(QKeySequence("Ctrl+Shift+E"))
    window.export_action.triggered.connect(partial(_choose_export, window))
    conversation.addAction(window.export_action)

    view = window.menuBar().addMenu("&View")
    window.inspector_action = window.inspector.toggleViewAction()
    window.inspector_action.setText("Context &Inspector")
    window.inspector_action.setShortcut(QKeySequence("Ctrl+I"))
    view.addAction(window.inspector_action)
    window.run_panel_action = window.run_panel.toggleViewAction()
    window.run_panel_action.setText("&Run panel")
    view.addAction(window.run_panel_action)
    changes = window.changes_panel.toggleViewAction()
    changes.setText("&Changed files")
    view.addAction(changes)
    themes = view.addMenu("&Theme")
    group = QActionGroup(window)
    window.theme_actions = {}
    for scheme, label in (("system", "&System"), ("light", "&Light"), ("dark", "&Dark")):
        action = QAction(label, window, checkable=True)
        action.triggered.connect(partial(window.theme_chosen.emit, scheme))
        group.addAction(action)
        themes.addAction(action)
        window.theme_actions[scheme] = action

    edit = window.menuBar().addMenu("&Edit")
    copy = QAction("&Copy message", window)
    copy.triggered.connect(window.transcript.copy_selection)
    edit.addAction(copy)
    find_next = QAction("Find &next match", window)
    find_next.setShortcut(QKeySequence(QKeySequence.StandardKey.FindNext))
    find_next.setStatusTip("The next place the search text occurs in this conversation")
    find_next.triggered.connect(lambda: window.find_requested.emit(1))
    edit.addAction(find_next)
    find_previous = QAction("Find &previous match", window)
    find_previous.setShortcut(QKeySequence(QKeySequence.StandardKey.FindPrevious))
    find_previous.triggered.connect(lambda: window.find_requested.emit(-1))
    edit.addAction(find_previous)
    focus = QAction("Focus message box", window)
    focus.setShortcut(QKeySequence("Ctrl+L"))
    focus.triggered.connect(lambda: window.composer.editor.setFocus())
    edit.addAction(focus)
    build_help_menu(window)


def _choose_new_project(window: WindowBase) -> None:
    path = QFileDialog.getExistingDirectory(window, "Choose a folder for the new project",
                                            window.folders.start("project"))
    if path:
        window.folders.chose("project", path)  # next time: beside it
        window.new_project_requested.emit(path)


def _choose_project(window: WindowBase) -> None:
    path = QFileDialog.getExistingDirectory(window, "Open a project folder",
                                            window.folders.start("project"))
    if path:
        window.folders.chose("project", path)
        window.open_project_requested.emit(path)


def _choose_import(window: WindowBase) -> None:
    path, _ = QFileDialog.getOpenFileName(
        window, "Import a conversation", window.folders.start("import"),
        "Conversations (*.json *.jsonl);;All files (*)")
    if path:
        window.folders.chose("import", path)
        window.import_requested.emit(path)

def export_name(title: str) -> str:
    """A file name from a conversation's title: what a file name cannot hold becomes "-" (so
    "tests/test_calc.py" stays readable), never a leading dot."""
    name = re.sub(r"[\\/:*?\"<>|\x00-\x1f]+", "-", title).strip(" .-")[:80]
    return name or "conversation"


_last_filter = next(iter(EXPORT_FILTERS))  # the form chosen last time is offered first


def _choose_export(window: WindowBase) -> None:
    global _last_filter
    title = window.conversations.current_title() or "conversation"
    name = export_name(title)
    suffix = {"openai": ".json", "jsonl": ".jsonl", "markdown": ".md"}[EXPORT_FILTERS[_last_filter]]
    path, chosen = QFileDialog.getSaveFileName(window, "Export the conversation",
                                               window.folders.start("export", name + suffix),
                                               ";;".join(EXPORT_FILTERS), _last_filter)
    if path:
        window.folders.chose("export", path)
        _last_filter = chosen if chosen in EXPORT_FILTERS else _last_filter
        window.export_requested.emit(path, EXPORT_FILTERS.get(chosen, "openai"))

"""The main window: conversation list | transcript + composer, status bar, menus.

It owns no data and does no I/O: the app's controller fills it and listens to its signals.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QMoveEvent, QShowEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.approval_dialog import ApprovalDialog
from ui.changes_panel import ChangesPanel
from ui.composer import Composer
from ui.conversation_list import ConversationList
from ui.elided_label import ElidedLabel
from ui.folders import DialogFolders
from ui.help_menu import show_help
from ui.inspector import InspectorPanel
from ui.list_width import ListWidth
from ui.mode_switcher import ModeSwitcher
from ui.output_viewer import OutputViewer
from ui.run_panel import RunPanel
from ui.todo_panel import TodoPanel
from ui.transcript_model import TranscriptModel
from ui.transcript_view import TranscriptView
from ui.usage_indicator import UsageIndicator
from ui.welcome import Welcome
from ui.window_base import WindowBase
from ui.window_menus import build_menus

LIST_MIN_WIDTH = 170  # the conversation list never gets narrower (titles, the search box)
SMALL_SCREEN = (1024, 700)  # a screen's available area under this: the window takes all of it


class MainWindow(WindowBase):
    """The window's parts laid out; its signals, and the actions its menus make, are declared
    in ui/window_base.py."""

    panel_width: int | None = None  # a side panel's width as the user left it (None: ours)
    _placing: bool | None = None  # None: not shown yet; True: being placed on the screen
    _frame = (0, 0)  # what the frame added to the window's size when it was first shown

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Context Workbench")
        self._first_size()

        self.folders = DialogFolders()
        self.conversations = ConversationList(self)
        self.transcript_model = TranscriptModel(self)
        self.transcript = TranscriptView(self)
        self.transcript.set_transcript_model(self.transcript_model)
        self.composer = Composer(self)
        self.mode_switcher = ModeSwitcher(self)
        self.todo = TodoPanel(self)

        self.banner = QLabel(self)
        self.banner.setWordWrap(True)
        self.banner.setObjectName("banner")  # its colours: ui/palette.py's sheet
        self.banner.hide()
        # A project that ships settings acting for the user, not trusted yet (core.trust): says
        # so for as long as it is open, with the way to review and trust them.
        self.trust_banner = QLabel(self)
        self.trust_banner.setWordWrap(True)
        self.trust_banner.setObjectName("banner")
        self.trust_banner.setTextFormat(Qt.TextFormat.RichText)
        self.trust_banner.linkActivated.connect(lambda _link: self.trust_requested.emit())
        self.trust_banner.hide()
        # Things the user should know once (a log line repaired, a setting refused), with a
        # dismiss button; unlike the read-only banner it does not stay.
        self.notice = QWidget(self)
        self.notice.setObjectName("notice")
        self.notice.setProperty("kind", "problem")
        self.notice.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.notice_label = QLabel(self.notice)
        self.notice_label.setWordWrap(True)
        self.notice_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice_button = QPushButton(self.notice)
        self.notice_button.clicked.connect(self.notice_action)
        self.notice_button.hide()
        dismiss = QToolButton(self.notice)
        dismiss.setText("✕")
        dismiss.setToolTip("Dismiss")
        dismiss.setAutoRaise(True)
        dismiss.clicked.connect(lambda: self.set_notice(None))
        nl = QHBoxLayout(self.notice)
        nl.setContentsMargins(12, 6, 6, 6)
        nl.addWidget(self.notice_label, 1)
        nl.addWidget(self.notice_button, 0, Qt.AlignmentFlag.AlignTop)
        nl.addWidget(dismiss, 0, Qt.AlignmentFlag.AlignTop)
        self.notice.hide()
        self.welcome = Welcome(self)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.transcript)

        right = QWidget(self)
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(0)
        rl.addWidget(self.banner)
        rl.addWidget(self.trust_banner)
        rl.addWidget(self.notice)
        rl.addWidget(self.stack, 1)
        rl.addWidget(self.todo)
        rl.addWidget(self.mode_switcher)
        rl.addWidget(self.composer)
        self.splitter = QSplitter(self)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setCollapsible(0, False)
        self.conversations.setMinimumWidth(LIST_MIN_WIDTH)  # titles stay readable
        self.splitter.setSizes([280, 920])
        self.list_width = ListWidth(self.splitter, 280, LIST_MIN_WIDTH)  # kept, given back
        self.setCentralWidget(self.splitter)
        self.inspector = InspectorPanel(self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.inspector)
        self.inspector.hide()
        self.inspector.visibilityChanged.connect(self._on_inspector_shown)
        self.run_panel = RunPanel(self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.run_panel)
        # Both panels share one place, as tabs: stacked, their heights together outgrew the
        # screen (and the window with them).
        self.tabifyDockWidget(self.inspector, self.run_panel)
        self.run_panel.hide()
        self.run_panel.visibilityChanged.connect(
            lambda visible: self._make_room(self.run_panel) if visible else None)
        self.changes_panel = ChangesPanel(self)  # the files agent turns changed
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.changes_panel)
        self.changes_panel.hide()

        self.model_label = ElidedLabel(self, widest=420)  # clicking it opens Settings
        self.model_label.setCursor(Qt.CursorShape.PointingHandCursor)
        self.model_label.clicked.connect(self.settings_requested)
        self.state_label = ElidedLabel(self)
        self.usage = UsageIndicator(self)
        bar = self.statusBar()
        bar.addWidget(self.state_label, 1)
        bar.addPermanentWidget(self.usage)
        bar.addPermanentWidget(self.model_label)

        self.transcript_model.modelReset.connect(self._update_stack)
        self.transcript_model.rowsInserted.connect(self._update_stack)
        self.transcript_model.rowsRemoved.connect(self._update_stack)
        build_menus(self)
        self._update_stack()

    def _first_size(self) -> None:
        """A comfortable size on a large screen; all of a small one (800x600): at nine tenths
        of it, 720 pixels wide, a side panel had no room left beside the list and transcript."""
        screen = self.screen().availableGeometry() if self.screen() else None
        if screen is None:
            self.resize(1200, 800)
        elif screen.width() < SMALL_SCREEN[0] or screen.height() < SMALL_SCREEN[1]:
            self.resize(screen.size())  # a window manager fits its frame in as well
        else:
            self.resize(min(1200, screen.width() * 9 // 10), min(800, screen.height() * 9 // 10))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._placing is None:  # the first show: fitted once the window manager placed it
            self._placing, self._frame = True, self._frame_size()
            QTimer.singleShot(3000, lambda: setattr(self, "_placing", False))
            # where the frame is known at once (Windows, macOS), no move comes to tell of it
            self.fit_screen()

    def _frame_size(self) -> tuple[int, int]:
        frame = self.frameGeometry()
        return frame.width() - self.width(), frame.height() - self.height()

    def moveEvent(self, event: QMoveEvent) -> None:
        super().moveEvent(event)
        if self._placing and self._frame_size() != self._frame:
            self._placing = False  # a window manager put its frame around the window: once
            self.fit_screen()

    def fit_screen(self) -> None:
        """Keep the whole window, its frame included, on the screen's available area: a
        window manager adds its title bar to a window as tall as a small screen."""
        screen = self.screen().availableGeometry() if self.screen() else None
        frame = self.frameGeometry()
        if screen is None or screen.contains(frame):
            return
        extra_w, extra_h = self._frame_size()
        self.resize(min(self.width(), screen.width() - extra_w),
                    min(self.height(), screen.height() - extra_h))
        frame = self.frameGeometry()
        self.move(max(screen.left(), min(frame.x(), screen.right() + 1 - frame.width())),
                  max(screen.top(), min(frame.y(), screen.bottom() + 1 - frame.height())))

    # --- menus -----------------------------------------------------------------------------------

    def _on_inspector_shown(self, visible: bool) -> None:
        if visible:
            self._make_room(self.inspector)

    def _make_room(self, dock: QDockWidget) -> None:
        """Room for a side panel, taken from the transcript, never from the conversation
        list (nor by widening the window). The panel shown is the tab in front."""
        dock.raise_()
        left = self.splitter.sizes()[0]
        right = self.splitter.widget(1)
        right_min = right.minimumSizeHint().width() if right is not None else 600
        room = self.width() - left - right_min - 24
        wanted = self.panel_width or 420  # as wide as the user left it last time
        width = max(dock.minimumSizeHint().width(), min(wanted, room))
        self.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
        total = sum(self.splitter.sizes())
        self.splitter.setSizes([left, max(0, total - left)])

    def set_recent_projects(self, paths: list[str]) -> None:
        self.recent_menu.clear()
        for path in paths:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _=False, p=path: self.open_project_requested.emit(p))
        self.recent_menu.setEnabled(bool(paths))

    # --- state shown -----------------------------------------------------------------------------

    def set_project(self, name: str, read_only_reason: str | None, folder: str = "") -> None:
        self.folders.project = folder  # file dialogs start there until the user goes elsewhere
        suffix = " [read-only]" if read_only_reason else ""
        self.setWindowTitle(f"{name}{suffix} — Context Workbench")
        self.conversations.set_project_name(name)
        self.conversations.set_writable(read_only_reason is None)
        self.new_conversation_action.setEnabled(read_only_reason is None)
        self.transcript.read_only = read_only_reason is not None
        self.compact_action.setEnabled(read_only_reason is None)
        self.banner.setText(f"Read-only: {read_only_reason}" if read_only_reason else "")
        self.banner.setVisible(read_only_reason is not None)
        self.composer.set_blocked("This project is open read-only." if read_only_reason else None)

    def set_restricted(self, text: str | None) -> None:
        """The project is restricted (`text` says what is not used), or not (None)."""
        self.trust_action.setEnabled(text is not None)
        self.trust_banner.setText("" if text is None else
                                  f"{html.escape(text)} <a href=\"trust\">Review and trust…</a>")
        self.trust_banner.setVisible(text is not None)

    def ask(self, text: str, detail: str, choices: tuple[str, ...],
            on_answer: Callable[[str], None], safe_default: bool = False) -> QMessageBox:
        """A question that does not block the window (the engine waits, not the screen): the
        chosen button's label goes to `on_answer`. `safe_default`: Enter, too, picks the last
        (safe) choice. Returns the box, to close if withdrawn."""
        box = QMessageBox(QMessageBox.Icon.Question, "Context Workbench asks", text,
                          QMessageBox.StandardButton.NoButton, self)
        box.setInformativeText(detail)
        buttons = {}
        for n, choice in enumerate(choices):
            role = (QMessageBox.ButtonRole.AcceptRole if n == 0
                    else QMessageBox.ButtonRole.RejectRole)
            buttons[box.addButton(choice, role)] = choice
        if buttons:  # Esc or closing the box picks the last choice (the safe one: "Deny")
            box.setEscapeButton(list(buttons)[-1])
            if safe_default:
                box.setDefaultButton(list(buttons)[-1])
        box.buttonClicked.connect(lambda button: on_answer(buttons[button]))
        box.setWindowModality(Qt.WindowModality.NonModal)
        box.show()
        return box

    def ask_approval(self, text: str, detail: str, choices: tuple[str, ...],
                     on_answer: Callable[[str, str], None]) -> ApprovalDialog:
        """The approval prompt for a tool call: the diff or command, Allow / Deny with a reason.
        Non-modal; returns the dialog, to withdraw if the turn is stopped."""
        dialog = ApprovalDialog(self, text, detail, choices, on_answer)
        dialog.show()
        return dialog

    def ask_text(self, title: str, label: str) -> str | None:
        """A line of text from the user, or None when they cancel."""
        text, ok = QInputDialog.getText(self, title, label)
        return text if ok else None

    def show_output(self, title: str, note: str, text: str, wrap: bool = False) -> OutputViewer:
        viewer = OutputViewer(self, title, note, text, wrap)
        viewer.show()
        return viewer

    def show_help(self, title: str, text_html: str) -> QMessageBox:
        return show_help(self, title, text_html)

    def show_error(self, title: str, text: str) -> None:
        QMessageBox.critical(self, title, text)

    def show_warning(self, title: str, text: str) -> None:
        QMessageBox.warning(self, title, text)

    def set_notice(self, text: str | None, action: str | None = None,
                   kind: str = "problem") -> None:
        """Show (or, with None, dismiss) a notice above the transcript, with an optional action
        button (its press is the `notice_action` signal). `kind`: "problem" (red) or "info"
        (blue: something under way, or done as asked)."""
        if self.notice.property("kind") != kind:
            self.notice.setProperty("kind", kind if kind in ("problem", "info") else "problem")
            self.restyle(self.notice)
        self.notice_label.setText(text or "")
        self.notice_button.setText(action or "")
        self.notice_button.setVisible(bool(text and action))
        self.notice.setVisible(bool(text))

    def show_notice(self, level: str, text: str, action: str | None = None) -> None:
        """Where each kind of notice shows: "info" in blue above the transcript, "warning" and
        "error" in red there."""
        self.set_notice(text, action, "info" if level == "info" else "problem")

    def clear_notice(self) -> None:
        self.set_notice(None)

    def show_unsent(self, text: str | None) -> None:
        """Why the message in the box was not sent, under the box (None: no reason any more)."""
        self.composer.show_warning(text)

    @staticmethod
    def restyle(widget: QWidget) -> None:
        """Apply the sheet again to a widget whose property it selects on changed."""
        style = widget.style()
        for w in (widget, *widget.findChildren(QWidget)):
            style.unpolish(w)
            style.polish(w)
        widget.update()

    def use_palette(self) -> None:
        """The palette changed (ui/palette.py): what we paint ourselves is painted again."""
        self.transcript.delegate.forget()
        self.transcript.viewport().update()
        self.usage.restyle()
        self.inspector.restyle()
        self.run_panel.restyle()

    def set_welcome(self, provider_configured: bool) -> None:
        self.welcome.set_configured(provider_configured)

    def set_status(self, model: str, state: str) -> None:
        self.model_label.hint = "Click to open Settings (Ctrl+,)"
        self.model_label.setText(f"  {model}  ")
        self.state_label.setText(state)

    def _update_stack(self, *args: object) -> None:
        empty = self.transcript_model.rowCount() == 0
        self.stack.setCurrentWidget(self.welcome if empty else self.transcript)

    def geometry_state(self) -> tuple[str, str]:
        return (bytes(self.saveGeometry().toBase64().data()).decode(),
                bytes(self.splitter.saveState().toBase64().data()).decode())

    def restore_geometry_state(self, geometry: str | None, splitter: str | None) -> None:
        if geometry:
            self.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
            self.fit_screen()  # saved on a larger screen? The whole window on this one
        if splitter:
            self.list_width.restore(QByteArray.fromBase64(splitter.encode()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing.emit()
        super().closeEvent(event)

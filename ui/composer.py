"""The message box: multi-line, Ctrl+Enter sends, Esc stops a running answer (or gives up editing
an earlier message)."""

from __future__ import annotations

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QEvent,
    QIODevice,
    QMimeData,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QImage, QKeyEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.flow_layout import FlowLayout
from ui.folders import DialogFolders
from ui.mentions import MentionCompleter

LARGE_PASTE_CHARS = 1_000_000  # a paste this long is held aside: Qt cannot lay it out quickly


def png_bytes(image: QImage) -> bytes:
    """A pasted image as PNG, made in memory."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # its stub says bytes; str works
    buffer.close()
    return bytes(data.data())


class _Editor(QPlainTextEdit):
    submit = Signal()
    escape = Signal()
    large_paste = Signal(str)
    files_dropped = Signal(list)  # local paths dropped or pasted: attached, not typed
    image_pasted = Signal(bytes)  # a pasted image (a screenshot), as PNG

    def popup_open(self) -> bool:  # the @-mention list is open (set by the Composer)
        return False

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = [u.toLocalFile() for u in source.urls() if u.isLocalFile()] \
            if source.hasUrls() else []
        if files:
            self.files_dropped.emit(files)
            return
        if source.hasImage():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.image_pasted.emit(png_bytes(image))
                return
        if source.hasText() and len(source.text()) > LARGE_PASTE_CHARS:
            self.large_paste.emit(source.text())  # laying out megabytes would freeze the window
            return
        super().insertFromMimeData(source)

    def event(self, event: QEvent) -> bool:
        # Tab would move the focus (tab changes focus here) before keyPressEvent sees it:
        # with the @-list open, it takes the suggestion instead.
        if isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress and \
                event.key() == Qt.Key.Key_Tab and self.popup_open() and self.take_completion():
            return True
        return super().event(event)

    def take_completion(self) -> bool:  # set by the Composer
        return False

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.popup_open() and event.key() in (
                Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Tab, Qt.Key.Key_Backtab,
                Qt.Key.Key_Escape):
            event.ignore()  # the @-mention list takes them
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and (
            event.modifiers() & Qt.KeyboardModifier.ControlModifier
        ):
            self.submit.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Signals:
        send_requested(str): the user asked to send this text.
        stop_requested(): the user asked to stop the running answer.
        draft_changed(): the text changed (for saving drafts, debounced by the owner).
        edit_cancelled(): the user gave up editing an earlier message (Cancel, or Esc).
    """

    send_requested = Signal(str)
    stop_requested = Signal()
    draft_changed = Signal()
    edit_cancelled = Signal()
    files_chosen = Signal(list)  # paths to attach (Attach…, dropped or pasted files)
    image_pasted = Signal(bytes)  # a pasted image, as PNG
    attachment_removed = Signal(int)  # the chip's place
    attach_requested = Signal()  # Attach…: the owner opens the dialog where the project is
    editing_changed = Signal()  # an earlier message is being edited now, or no longer

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = _Editor(self)
        self.mentions = MentionCompleter(self.editor)
        self.editor.popup_open = self.mentions.popup_open  # type: ignore[method-assign]
        self.editor.take_completion = self.mentions.take_current  # type: ignore[method-assign]
        self.editor.setPlaceholderText("Message…  (Ctrl+Enter to send, Esc to stop, @ to attach "
                                       "a project file)")
        self.editor.setTabChangesFocus(True)
        self.editor.setMinimumHeight(60)
        self.editor.setMaximumHeight(160)
        self.editor.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)
        self.editor.sizeHint = lambda: QSize(400, 84)  # type: ignore[method-assign]
        self.send_button = QPushButton("Send", self)
        self.send_button.setToolTip("Send (Ctrl+Enter)")
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("Stop the answer (Esc); what arrived is kept")
        self.stop_button.hide()
        self.attach_button = QPushButton("Attach…", self)
        self.attach_button.setObjectName("attach")
        self.attach_button.setToolTip("Attach files or images to the next message "
                                      "(Ctrl+Shift+A); you can also drop files on the box, "
                                      "paste a screenshot, or type @ to name a project file")
        self.attach_button.clicked.connect(self.attach_requested)
        self._chips: list[str] = []
        self.chips = QWidget(self)
        self.chips.setObjectName("chips")
        self.chips_row = FlowLayout(self.chips)  # wraps: many chips never widen the window
        self.chips.hide()
        self.hint = QLabel("", self)
        self.hint.setObjectName("hint")  # colours: ui/palette.py's sheet
        self.hint.setWordWrap(True)
        self.hint.hide()
        self._held = ""  # a large paste, kept as is and sent after the typed text
        self._held_tokens: tuple[int, bool] | None = None  # the draft's count (the meter's)
        self.held_label = QLabel("", self)
        self.held_label.setObjectName("held")
        self.held_label.setWordWrap(True)  # a long sentence never squeezes the list
        self.held_remove = QPushButton("Remove", self)
        self.held_remove.setFlat(True)
        self.held_remove.clicked.connect(lambda: self._hold(""))
        held_row = QHBoxLayout()
        held_row.addWidget(self.held_label, 1)
        held_row.addWidget(self.held_remove)
        self.held_label.hide()
        self.held_remove.hide()
        self.editing_label = QLabel("", self)  # editing an earlier message: sending branches
        self.editing_label.setObjectName("editing")
        self.editing_label.setWordWrap(True)
        self.editing_cancel = QPushButton("Cancel edit", self)
        self.editing_cancel.setFlat(True)
        self.editing_cancel.clicked.connect(self.edit_cancelled)
        editing_row = QHBoxLayout()
        editing_row.addWidget(self.editing_label, 1)
        editing_row.addWidget(self.editing_cancel)
        self.editing_label.hide()
        self.editing_cancel.hide()

        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.attach_button)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.addWidget(self.editor, 1)
        row.addLayout(buttons)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 6, 12, 10)
        outer.addWidget(self.hint)
        outer.addLayout(editing_row)
        outer.addLayout(held_row)
        outer.addWidget(self.chips)
        outer.addLayout(row)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self._busy = False
        self._blocked_reason: str | None = None
        self.editor.submit.connect(self._on_editor_submit)
        self.editor.escape.connect(self._on_editor_escape)
        self.editor.textChanged.connect(self._on_editor_text_changed)
        self.editor.large_paste.connect(self._hold)
        self.editor.files_dropped.connect(self.files_chosen)
        self.editor.image_pasted.connect(self.image_pasted)
        self.send_button.clicked.connect(self._on_editor_submit)
        self.stop_button.clicked.connect(self.stop_requested)
        self._update_buttons()

    def text(self) -> str:
        typed = self.editor.toPlainText()
        if not self._held:
            return typed
        return f"{typed}\n\n{self._held}" if typed.strip() else self._held

    def set_text(self, text: str) -> None:
        if len(text) > LARGE_PASTE_CHARS:
            self.editor.blockSignals(True)
            self.editor.setPlainText("")
            self.editor.blockSignals(False)
            self._hold(text)
            return
        self._held = ""
        self._show_held()
        self.editor.setPlainText(text)
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)

    def held_size(self) -> int:
        return len(self._held)

    def _hold(self, text: str) -> None:
        self._held = text
        self._show_held()
        self._on_editor_text_changed()

    def _show_held(self) -> None:
        size = len(self._held.encode("utf-8", "replace")) if self._held else 0
        text = f"Pasted text · {size / 2**20:.1f} MB, kept as is and sent with your message"
        if self._held_tokens is not None:  # the draft's one count, as the meter shows it
            tokens, estimated = self._held_tokens
            text += (f", which comes to {'about ' if estimated else ''}{tokens:,} tokens"
                     f"{' (counting…)' if estimated else ''}")
        self.held_label.setText(text)
        self.held_label.setToolTip(f"{len(self._held):,} characters, not laid out in the box "
                                   "(so many would slow the window down)")
        self.held_label.setVisible(bool(self._held))
        self.held_remove.setVisible(bool(self._held))

    def set_held_tokens(self, tokens: int, estimated: bool) -> None:
        """The draft's tokens (the meter's figure: typed text, the held paste and what is
        attached), said on the held paste's line; `estimated`: a long draft not counted yet."""
        if self._held_tokens != (tokens, estimated):
            self._held_tokens = (tokens, estimated)
            if self._held:
                self._show_held()

    def choose_files(self, folders: DialogFolders) -> None:
        """Attach… (and File → Attach…): the files picked go to the owner to be read. The
        dialog opens where the last files came from, else in the project."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files to the next message",
                                                folders.start("attach"))
        if paths:
            folders.chose("attach", paths[0])
            self.files_chosen.emit(paths)

    def set_attachments(self, chips: list[tuple[str, str]]) -> None:
        """The attachments of the next message: (label, tooltip) each, removable."""
        self._chips = [label for label, _ in chips]
        while self.chips_row.count():
            item = self.chips_row.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.hide()  # at once: deleted later, it would show where it was till then
                widget.deleteLater()
        for n, (label, tip) in enumerate(chips):
            chip = QToolButton(self.chips)
            chip.setObjectName("chip")
            chip.setText(f"{label}  ✕")
            chip.setToolTip(f"{tip}\nClick to remove it from the message.")
            chip.setAccessibleName(f"Attachment {label}; press to remove")
            chip.clicked.connect(lambda _=False, n=n: self.attachment_removed.emit(n))
            chip.setMaximumWidth(420)  # a long name is cut (the tooltip has it whole)
            self.chips_row.addWidget(chip)
        self.chips.setVisible(bool(chips))
        self._on_editor_text_changed()

    def attachment_labels(self) -> list[str]:
        return list(self._chips)

    def set_editing(self, note: str | None) -> None:
        """Editing an earlier message: `note` says what sending will do (None: not editing)."""
        was = self.editing()
        self.editing_label.setText(note or "")
        self.editing_label.setVisible(note is not None)
        self.editing_cancel.setVisible(note is not None)
        if was != (note is not None):
            self.editing_changed.emit()

    def editing(self) -> bool:
        return not self.editing_label.isHidden()

    def set_busy(self, busy: bool) -> None:
        """While a turn runs: Send is disabled and Stop shows."""
        self._busy = busy
        self.stop_button.setVisible(busy)
        self._update_buttons()

    def set_blocked(self, reason: str | None) -> None:
        """Sending is impossible (read-only project, no conversation): say why."""
        self._blocked_reason = reason
        self.editor.setReadOnly(reason is not None)
        self.hint.setText(reason or "")
        self.hint.setVisible(reason is not None)
        self._update_buttons()

    def show_warning(self, text: str | None) -> None:
        """A one-off explanation under the box (why a message was not sent)."""
        if self._blocked_reason is None:
            self.hint.setText(text or "")
            self.hint.setVisible(bool(text))

    def _update_buttons(self) -> None:
        has_text = bool(self._held) or bool(self._chips) or \
            bool(self.editor.toPlainText().strip())
        can_send = not self._busy and self._blocked_reason is None and has_text
        self.send_button.setEnabled(can_send)

    def _on_editor_submit(self) -> None:
        if self._busy or self._blocked_reason is not None:
            return
        text = self.text()
        if text.strip() or self._chips:
            self.send_requested.emit(text)

    def _on_editor_escape(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        elif self.editing():
            self.edit_cancelled.emit()

    def _on_editor_text_changed(self) -> None:
        if self._blocked_reason is None and not self.hint.isHidden():
            self.hint.hide()  # "Not sent: …" was about the draft as it was
        self._update_buttons()
        self.draft_changed.emit()

"""The workflow editor as a user meets it: edit steps, reorder them, press OK, read the result."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QPlainTextEdit
from pytestqt.qtbot import QtBot

from core.workflows.workflow import Workflow, validate_workflow
from ui.workflow_dialog import WorkflowDialog

WAIT_MS = 5000


def three_steps() -> Workflow:
    return validate_workflow({
        "name": "Release notes", "description": "Draft the notes for the next release",
        "steps": [
            {"id": "collect", "title": "Collect the changes",
             "brief": "List the merged changes since the last tag."},
            {"id": "draft", "title": "Draft the notes", "brief": "Write a first draft.",
             "done_when": "Every change is mentioned.", "tools": ["read_file", "write_file"],
             "depends_on": ["collect"]},
            {"id": "polish", "title": "Polish", "brief": "Tighten the wording.",
             "max_rounds": 12},
        ]})


def open_dialog(qtbot: QtBot, workflow: Workflow | None, **kwargs: str) -> WorkflowDialog:
    d = WorkflowDialog(workflow, parent=None, **kwargs)
    qtbot.addWidget(d)
    d.show()
    d.activateWindow()  # keys and focus go to the active window
    qtbot.waitUntil(d.isActiveWindow, timeout=WAIT_MS)
    return d


@pytest.fixture
def dialog(qtbot: QtBot) -> WorkflowDialog:
    return open_dialog(qtbot, three_steps(), title="Edit workflow")


def select(qtbot: QtBot, d: WorkflowDialog, row: int) -> None:
    """Click a step in the list, as a user does."""
    rect = d.steps_list.visualItemRect(d.steps_list.item(row))
    qtbot.mouseClick(d.steps_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert d.steps_list.currentRow() == row


def replace_text(qtbot: QtBot, edit: QLineEdit | QPlainTextEdit, text: str) -> None:
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Delete)
    qtbot.keyClicks(edit, text)


def press_ok(qtbot: QtBot, d: WorkflowDialog) -> None:
    qtbot.mouseClick(d.buttons.button(QDialogButtonBox.StandardButton.Ok),
                     Qt.MouseButton.LeftButton)


def accepted(qtbot: QtBot, d: WorkflowDialog) -> Workflow:
    qtbot.waitUntil(lambda: d.result() == QDialog.DialogCode.Accepted, timeout=WAIT_MS)
    wf = d.workflow()
    assert wf is not None and not d.isVisible()
    return wf


def error_text(d: WorkflowDialog) -> str:
    label = d.findChild(QLabel, "error")
    assert label is not None
    return label.text() if label.isVisible() else ""


def ids(wf: Workflow) -> list[str]:
    return [s.id for s in wf.steps]


def test_editing_the_second_steps_brief_gives_a_workflow_with_that_brief(
        qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 1)
    replace_text(qtbot, dialog.brief_edit, "Write the notes in three sections.")
    press_ok(qtbot, dialog)
    wf = accepted(qtbot, dialog)
    assert wf.steps[1].brief == "Write the notes in three sections."
    # Everything not touched comes back as it was.
    assert wf == three_steps().model_copy(update={"steps": (
        wf.steps[0], three_steps().steps[1].model_copy(update={"brief": wf.steps[1].brief}),
        wf.steps[2])})
    assert wf.steps[2].max_rounds == 12 and wf.steps[1].tools == ("read_file", "write_file")


def test_switching_steps_keeps_typed_text(qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 0)
    replace_text(qtbot, dialog.title_edit, "Gather")
    qtbot.keyClicks(dialog.done_edit, "All merged PRs are listed.")
    select(qtbot, dialog, 2)
    assert dialog.title_edit.text() == "Polish"
    select(qtbot, dialog, 0)
    assert dialog.title_edit.text() == "Gather"
    assert dialog.done_edit.toPlainText() == "All merged PRs are listed."
    assert dialog.steps_list.item(0).text() == "1. Gather"
    dialog.brief_edit.setFocus()
    qtbot.keyClick(dialog.brief_edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wf = accepted(qtbot, dialog)
    assert wf.steps[0].title == "Gather" and wf.steps[0].done_when == "All merged PRs are listed."


def test_adding_moving_and_removing_steps_changes_the_order(qtbot: QtBot,
                                                            dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 2)
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert dialog.steps_list.count() == 4 and dialog.steps_list.currentRow() == 3
    assert dialog.id_edit.text() == "step-4"
    qtbot.keyClicks(dialog.title_edit, "Publish")
    replace_text(qtbot, dialog.brief_edit, "Post the notes.")
    qtbot.mouseClick(dialog.up_button, Qt.MouseButton.LeftButton)  # above "polish"
    select(qtbot, dialog, 0)
    dialog.steps_list.setFocus()
    qtbot.keyClick(dialog.steps_list, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
    assert dialog.steps_list.currentRow() == 1
    assert [dialog.steps_list.item(r).text() for r in range(4)] == [
        "1. Draft the notes", "2. Collect the changes", "3. Publish", "4. Polish"]
    # "draft" depended on "collect", now after it: move "draft" back down past it, then
    # remove "polish" with the keyboard.
    select(qtbot, dialog, 0)
    qtbot.mouseClick(dialog.down_button, Qt.MouseButton.LeftButton)
    select(qtbot, dialog, 3)
    dialog.steps_list.setFocus()
    qtbot.keyClick(dialog.steps_list, Qt.Key.Key_Delete)
    assert dialog.steps_list.count() == 3
    press_ok(qtbot, dialog)
    wf = accepted(qtbot, dialog)
    assert ids(wf) == ["collect", "draft", "step-4"]
    assert wf.steps[2].title == "Publish" and wf.steps[2].brief == "Post the notes."


def test_a_dependency_moved_after_its_step_is_refused_and_named(qtbot: QtBot,
                                                                dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 0)
    qtbot.mouseClick(dialog.down_button, Qt.MouseButton.LeftButton)
    press_ok(qtbot, dialog)
    qtbot.waitUntil(lambda: "depends on 'collect'" in error_text(dialog), timeout=WAIT_MS)
    assert dialog.isVisible() and dialog.steps_list.currentRow() == 0  # "draft"


def test_renaming_a_step_keeps_the_steps_that_depend_on_it(qtbot: QtBot,
                                                           dialog: WorkflowDialog) -> None:
    replace_text(qtbot, dialog.id_edit, "gather")
    press_ok(qtbot, dialog)
    wf = accepted(qtbot, dialog)
    assert ids(wf) == ["gather", "draft", "polish"] and wf.steps[1].depends_on == ("gather",)


def test_an_empty_brief_keeps_the_dialog_open_with_the_step_selected(
        qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 1)
    replace_text(qtbot, dialog.brief_edit, "   ")
    select(qtbot, dialog, 0)
    press_ok(qtbot, dialog)
    qtbot.waitUntil(lambda: error_text(dialog).startswith("Step 2 (") and "Brief is missing." in error_text(dialog), timeout=WAIT_MS)
    assert dialog.isVisible() and dialog.workflow() is None
    assert dialog.steps_list.currentRow() == 1 and dialog.brief_edit.hasFocus()
    qtbot.keyClicks(dialog.brief_edit, "Write a first draft.")
    press_ok(qtbot, dialog)
    assert accepted(qtbot, dialog).steps[1].brief == "Write a first draft."


def test_a_duplicate_id_keeps_the_dialog_open_with_the_later_step_selected(
        qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 2)
    replace_text(qtbot, dialog.id_edit, "collect")
    select(qtbot, dialog, 0)
    press_ok(qtbot, dialog)
    qtbot.waitUntil(lambda: "the id 'collect'" in error_text(dialog), timeout=WAIT_MS)
    assert dialog.isVisible() and dialog.workflow() is None
    assert dialog.steps_list.currentRow() == 2 and dialog.id_edit.hasFocus()


def tool_row(d: WorkflowDialog, name: str) -> int:
    return next(r for r in range(d.tools_list.count()) if d.tools_list.item(r).text() == name)


def test_all_tools_unchecked_and_two_tools_checked_gives_those_two(qtbot: QtBot,
                                                                   dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 0)
    assert dialog.all_tools.isChecked() and not dialog.tools_list.isEnabled()
    dialog.all_tools.setFocus()
    qtbot.keyClick(dialog.all_tools, Qt.Key.Key_Space)
    assert dialog.tools_list.isEnabled()
    dialog.tools_list.setFocus()
    for name in ("search_files", "read_file"):  # the keyboard: select, Space checks it
        dialog.tools_list.setCurrentRow(tool_row(dialog, name))
        qtbot.keyClick(dialog.tools_list, Qt.Key.Key_Space)
    press_ok(qtbot, dialog)
    wf = accepted(qtbot, dialog)
    assert wf.steps[0].tools == ("search_files", "read_file")
    assert wf.steps[2].tools is None  # the other steps keep every tool


def test_all_tools_checked_and_unchecked_again_restores_the_steps_tools(
        qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 1)
    dialog.all_tools.click()
    assert dialog.all_tools.isChecked() and not dialog.tools_list.isEnabled()
    select(qtbot, dialog, 0)
    select(qtbot, dialog, 1)
    dialog.all_tools.click()
    checked = [dialog.tools_list.item(r).text() for r in range(dialog.tools_list.count())
               if dialog.tools_list.item(r).checkState() == Qt.CheckState.Checked]
    assert checked == ["read_file", "write_file"]
    press_ok(qtbot, dialog)
    assert accepted(qtbot, dialog).steps[1].tools == ("read_file", "write_file")


def test_all_tools_checked_again_means_every_tool(qtbot: QtBot, dialog: WorkflowDialog) -> None:
    select(qtbot, dialog, 1)
    assert not dialog.all_tools.isChecked()
    dialog.all_tools.click()
    press_ok(qtbot, dialog)
    assert accepted(qtbot, dialog).steps[1].tools is None


def test_a_new_workflow_starts_with_one_step_and_needs_a_name(qtbot: QtBot) -> None:
    d = open_dialog(qtbot, None)
    assert d.windowTitle() == "New workflow" and d.steps_list.count() == 1
    assert d.id_edit.text() == "step-1" and not d.remove_button.isEnabled()
    qtbot.keyClicks(d.title_edit, "Look around")
    qtbot.keyClicks(d.brief_edit, "List the files.")
    replace_text(qtbot, d.max_rounds.lineEdit(), "5")
    press_ok(qtbot, d)
    qtbot.waitUntil(lambda: error_text(d) == "The workflow needs a name.", timeout=WAIT_MS)
    assert d.name_edit.hasFocus()
    qtbot.keyClicks(d.name_edit, "Tour")
    qtbot.keyClick(d.name_edit, Qt.Key.Key_Return)
    wf = accepted(qtbot, d)
    assert wf.name == "Tour" and wf.steps[0].title == "Look around"
    assert wf.steps[0].max_rounds == 5 and wf.steps[0].tools is None


def test_cancel_gives_nothing(qtbot: QtBot, dialog: WorkflowDialog) -> None:
    replace_text(qtbot, dialog.name_edit, "Other")
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Cancel),
                     Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=WAIT_MS)
    assert dialog.result() == QDialog.DialogCode.Rejected and dialog.workflow() is None

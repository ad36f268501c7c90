"""The Context Inspector in the window: the meter's live preview of the next request (the same
build a turn runs), every entry's decision, and a click that shows the entry in the transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelectionModel

from app.window.conversation_settings import set_conversation
from app.window.inspector_rows import (
    EntryNumbers,
    KeptRows,
    Rows,
    holds,
    label,
    left_out,
    sent_at,
    summary_lines,
)
from app.window.meter import UsageMeter
from app.window.notices import Notices
from app.window.tools_flow import ToolsFlow, ToolsHost
from core.context.builder import BudgetError, BuiltRequest
from core.context.digest import DIGEST_MARK
from core.context.report import BuildReport
from core.context.report_text import (
    budget_parts,
    cached_tokens,
    inspector_header,
    inspector_rows,
    instructions_switch,
    saved_view,
    sent_before,
    since_last,
)
from core.give_way import give_way
from core.model import ConversationMessage, annotation
from core.store.errors import StoreError
from core.store.project import Project
from core.store.requests import latest_request, read_request, saved_requests
from ui.main_window import MainWindow
from ui.throttle import Throttle

SLIDER_DEBOUNCE_MS = 60  # a slider step rebuilds once the slider rests this long
DRAFT_DEBOUNCE_MS = 400  # typing pauses this long before the decisions follow the draft



InspectorHost = ToolsHost  # what the panel needs of the window's session (the controller)


class InspectorFlow:
    def __init__(self, window: MainWindow, notices: Notices, host: InspectorHost,
                 meter: UsageMeter) -> None:
        self.window = window
        self.notices = notices
        self.host = host
        self.meter = meter
        self.panel = window.inspector
        # the last request's copy read from disk: (path, its messages, the ids it carried)
        self._previous: tuple[Path, tuple[list[Any], set[str] | None], Any] | None = None
        meter.listeners.append(self.refresh)
        self.panel.visibilityChanged.connect(self._on_visibility_changed)
        self.panel.entry_clicked.connect(self.show_entry)
        self.panel.summary_action.connect(lambda entry, action: self.annotate([entry], action))
        window.transcript.entry_action.connect(self.annotate)
        self.panel.model_view_toggled.connect(self._on_model_view_toggled)
        self.panel.instructions_toggled.connect(self._on_instructions_toggled)
        self.tools = ToolsFlow(window, notices, host, meter)  # the tools offered, switchable
        self.refresh_after_slider = Throttle(self.refresh, SLIDER_DEBOUNCE_MS, self.panel,
                                             mode="debounce")
        self.panel.budget_changed.connect(lambda _value: self.refresh_after_slider())
        self.panel.request_picked.connect(lambda _k: self.refresh())
        self.refresh_after_draft = Throttle(self.refresh, DRAFT_DEBOUNCE_MS, self.panel,
                                            mode="debounce")
        meter.draft_listeners.append(self._on_draft)
        self._draft = 0
        self._saved: list[Path] = []
        self._rows: KeptRows | None = None  # the last report's rows
        self._positions = EntryNumbers()
        self._since: tuple[BuildReport, Path, str] | None = None  # and its "since the last"
        self._comparing: tuple[BuildReport, Path] | None = None  # a comparison under way
        # the draft the decisions follow now, and its attachments ("", 0: none)
        self._shown_draft: tuple[str, int] = ("", 0)
        self._header: tuple[BuildReport, str] | None = None  # the live view's, without "since"
        self._shown = False  # the panel is open (read on the meter's thread)
        self._sent: list[Any] = []  # the messages of the request shown (its digest, on a click)
        meter.preparers["inspector rows"] = self._prepare_rows
        meter.preparers["since last"] = self._prepare_since
        meter.preparers["summaries"] = lambda built, messages: (
            (built.report, self._summaries(messages, built.report)) if self._shown else None)

    def annotate(self, ids: list[str], action: str) -> None:
        """Pin, unpin, exclude or include entries: appended to the log as annotations (never
        rewriting a line), shown in place, and the meter (then this panel) follows."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None or project.read_only:
            return
        context = self.meter.context
        if context is None:
            return
        failure = context.writer.write(conv, [annotation(i, action) for i in ids],
                                       "the change").failure
        if failure is not None:
            self.notices.warning(f"Not changed: {failure.cause}.")
            return
        try:
            folded = {m.id: m for m in project.conversations.load(conv).messages if m.id in ids}
        except StoreError as e:
            self.notices.warning(f"Not changed: {e}")
            return
        self.window.transcript_model.update_messages(folded)
        self.host.refresh_usage()

    def _prepare_rows(self, built: BuiltRequest, messages: list[ConversationMessage]
                      ) -> KeptRows | None:
        """The panel's rows of a new request, made where the meter builds it (off the window
        for a long log, whose 10,000 rows would hold it up); only while the panel is open."""
        if not self._shown:
            return None
        return self._kept_rows(built.report, messages, give_way)

    def _on_instructions_toggled(self, on: bool) -> None:
        """Send the project's AGENTS.md in this conversation, or not: kept with the
        conversation; the next request changes its prefix once (a new compaction, named)."""
        if set_conversation(self.host.project, self.host.current_id, self.notices,
                            "Not changed", project_instructions=on):
            self.host.refresh_usage()

    def _on_visibility_changed(self, visible: bool) -> None:
        self._shown = visible
        if visible:
            self.refresh()
        else:
            self._dim({})

    def _on_model_view_toggled(self, on: bool) -> None:
        self.refresh()
        if not on:
            self._dim({})

    def _dim(self, left_out: dict[str, str]) -> None:
        """The transcript's model view: rows the request leaves out are dimmed, with why."""
        delegate = self.window.transcript.delegate
        delegate.model_view = bool(left_out) or (self.panel.model_view.isChecked()
                                                 and self.panel.isVisible())
        delegate.left_out = left_out
        self.window.transcript.viewport().update()

    def refresh(self) -> None:
        """Show the meter's last build (nothing is built here: the panel costs no request)."""
        if not self.panel.isVisible():
            return
        report = self.meter.report
        project, conv = self.host.project, self.host.current_id
        self._sent = []
        if report is None or project is None or conv is None:
            self.panel.clear("No request to show: open a conversation (or see the meter for "
                             "why the next request cannot be built).")
            return
        if self.meter.built is not None and self.meter.built.report is report:
            self._sent = self.meter.built.messages
        messages = self.host.history(conv)  # (while editing: the part before the edit)
        self._saved = saved_requests(project.state / "requests", conv)
        self.panel.set_saved([label(p) for p in self._saved])
        picked = self.panel.picker.currentIndex()
        if picked > 0 and picked <= len(self._saved):
            self._show_saved(self._saved[picked - 1], messages)
            return
        shown = self._what_if(conv, report, messages)
        if shown is not None:
            self._show_report(project, conv, *shown)

    def _what_if(self, conv: str, report: BuildReport, messages: list[ConversationMessage]
                 ) -> tuple[BuildReport, int | None, list[ConversationMessage]] | None:
        """(the report to show, the usable tokens of a budget preview, the messages it
        holds): the meter's, or at another budget, or the request as it would go if the draft
        were sent now (debounced as it is typed): a what-if build, nothing sent. None when
        that build is over its budget (the panel says why)."""
        percent = self.panel.slider.value()
        draft = self._draft_text()
        attached = self.meter.attached() if percent == 100 else []
        self._shown_draft = (draft, len(attached))
        if percent == 100 and not draft and not attached:
            return report, None, messages
        usable = max(1, report.usable * percent // 100) if percent != 100 else None
        what_if = [*messages, self.meter.draft_message(draft, attached)] \
            if draft or attached else messages
        try:
            built = self.meter.preview(conv, what_if, usable)
        except BudgetError as e:
            self.panel.clear(f"Budget preview at {usable:,} usable tokens: {e}"
                             if usable else f"With your draft: {e}")
            self._dim({})
            return None
        if built is None:
            return report, None, messages
        self._sent = built.messages
        return built.report, usable, what_if

    def _show_report(self, project: Project, conv: str, report: BuildReport,
                     preview: int | None, messages: list[ConversationMessage]) -> None:
        """The panel's header, budget bar, rows, instructions switch and summaries for
        `report`; the line on what changed since the last request only for the meter's own."""
        rows = self._rows_of(report, messages)
        live = report is self.meter.report
        header = self._header_text(report, preview, live)
        self._header = (report, header) if live else None
        since = self._since_last(project, conv, report) if live else None
        # the request built with the draft as its next message holds the draft: shown apart
        inside = not live and preview is None and any(self._shown_draft)
        self.panel.show_request(header + ("\n" + since if since else ""),
                                budget_parts(report, self._draft if live or inside else 0,
                                             draft_inside=inside), rows)
        self.panel.show_instructions(*instructions_switch(report))
        if self.panel.model_view.isChecked():
            self._dim(left_out(rows))
        prepared = self.meter.prepared.get("summaries")
        self.panel.show_summaries(prepared[1] if prepared is not None and prepared[0] is report
                                  else self._summaries(messages, report))

    def _header_text(self, report: BuildReport, preview: int | None, live: bool) -> str:
        """What the request shown is: the meter's next one (with its price, core.cost), a
        budget preview, or the request with the draft as the next message."""
        header = inspector_header(report)
        if live:
            header += "\n" + self.meter.cost_note(report.provider_estimate)
        if preview is not None:
            header = (f"Preview at {preview:,} usable tokens ({self.panel.slider.value()}% of "
                      f"the budget) — nothing is sent\n{header}")
        elif not live:
            header = f"With your draft as the next message (not sent yet)\n{header}"
        return header

    def _draft_text(self) -> str:
        """The draft the decisions follow: the composer's text at the configured budget,
        unless it is a command (not the next message)."""
        draft = self.window.composer.text().strip() if self.panel.slider.value() == 100 else ""
        return "" if draft.startswith("/") else draft

    def _rows_of(self, report: BuildReport, messages: list[ConversationMessage]) -> Rows:
        """The panel's rows for `report` (kept for the last report: reopening the panel,
        switching the model view or an entry appended by a running turn does not redo 10,000
        of them on the window's thread)."""
        prepared = self.meter.prepared.get("inspector rows")
        if prepared is not None and prepared[0] is report and holds(prepared, messages):
            self._rows = prepared
        if self._rows is not None and self._rows[0] is report and holds(self._rows, messages):
            return self._rows[3]
        self._rows = self._kept_rows(report, messages)
        return self._rows[3]

    def _since_last(self, project: Project, conv: str, report: BuildReport) -> str | None:
        """The stable prefix against the last request sent (its copy in .workbench/requests)."""
        built = self.meter.built
        if built is None or built.report is not report or self.meter.context is None:
            return None
        if not self._saved:  # listed by `refresh` a moment ago
            return "No request sent yet in this conversation: nothing to compare with."
        prepared = self.meter.prepared.get("since last")
        if prepared is not None and prepared[0] is report and prepared[1] == self._saved[0]:
            self._since = prepared
        if self._since is not None and self._since[0] is report and \
                self._since[1] == self._saved[0]:
            return self._since[2]  # the same request against the same one: said already
        # A request was sent after this one was built (a turn is under way): reading its copy
        # (megabytes on a long log) is done where the meter builds; the line joins the header
        # when it is ready.
        if self._comparing != (report, self._saved[0]):
            self._comparing = (report, self._saved[0])
            self.meter.aside(lambda: self._compare(project, conv, built), self._on_compared)
        return None

    def _on_compared(self, since: tuple[BuildReport, Path, str] | None) -> None:
        self._comparing = None
        if since is None:
            return
        self._since = since
        shown = self._header
        if (shown is not None and shown[0] is since[0] and self.panel.isVisible()
                and self._saved[:1] == [since[1]]):
            self.panel.header.setText(shown[1] + "\n" + since[2])

    def _prepare_since(self, built: BuiltRequest, _messages: list[ConversationMessage]
                       ) -> tuple[BuildReport, Path, str] | None:
        """`_compare` where the meter builds (reading the last request's copy, megabytes on
        a long log, off the window); only while the panel is open."""
        project, conv = self.host.project, self.host.current_id
        if not self._shown or project is None or conv is None:
            return None
        return self._compare(project, conv, built)

    def _compare(self, project: Project, conv: str, built: BuiltRequest
                 ) -> tuple[BuildReport, Path, str] | None:
        """(request, the last one sent, what changed between them in words)."""
        newest = saved_requests(project.state / "requests", conv)[:1]
        if not newest or self.meter.context is None:
            return None
        engine = self.host.engine
        kept = engine.saved_request(conv) if engine is not None else None
        if kept is not None and kept[0] == newest[0]:
            # sent from this window: the request is still in memory (its copy is megabytes
            # on a long log, and one json.loads of it holds the GIL the window waits for)
            path, tools = kept[0], kept[1].tools
            before: tuple[list[Any], set[str] | None] = (kept[1].messages,
                                                         kept[1].report.sent_ids())
        else:
            previous = self._previous
            if previous is None or previous[0] != newest[0]:
                found = latest_request(project.state / "requests", conv)  # once per request
                if found is None:
                    return None
                previous = self._previous = (found[0], sent_before(found[1]),
                                             found[1].get("tools") or [])
            path, before, tools = previous
        when = sent_at(path, "earlier")
        report = built.report
        answer = next((m for m in reversed(project.conversations.load(conv).messages)
                       if m.role == "assistant" and m.usage), None)  # to the last request
        return report, path, since_last(*before, built.messages, report,
                                        self.meter.context.counter(report.model), when,
                                        cached_tokens(answer.usage) if answer else None,
                                        tools_changed=tools != built.tools)

    def _on_draft(self, tokens: int) -> None:
        """The draft as it is typed: the bar follows each keystroke (cheap); the decisions
        follow once typing rests (a build with the draft as the next message)."""
        self._draft = tokens
        report = self.meter.report
        if (self.panel.isVisible() and report is not None
                and self.panel.picker.currentIndex() == 0 and self.panel.slider.value() == 100):
            self.panel.bar.set_parts(budget_parts(report, tokens))
            if (self._draft_text(), len(self.meter.attached())) != self._shown_draft:
                self.refresh_after_draft()

    def _show_saved(self, path: Path, messages: list[ConversationMessage]) -> None:
        data = read_request(path)
        if data is None:
            self.panel.clear(f"The kept request {path.name} cannot be read.")
            return
        report = data["report"]
        self._sent = data.get("messages") or []
        header, parts, rows = saved_view(report, self._positions.of(messages))
        self.panel.show_request(f"{label(path)} ({len(data.get('messages') or []):,} "
                                f"messages, as kept in .workbench/requests)\n{header}",
                                parts, rows)
        if self.panel.model_view.isChecked():
            self._dim(left_out(rows))

    def _summaries(self, messages: list[ConversationMessage], report: BuildReport
                   ) -> list[tuple[str, str, bool, str]]:
        context = self.meter.context
        return [] if context is None else summary_lines(messages, context.counter(report.model),
                                                        report)

    def _kept_rows(self, report: BuildReport, messages: list[ConversationMessage],
                   pause: Callable[[], None] | None = None) -> KeptRows:
        return (report, len(messages), messages[-1].id if messages else "",
                inspector_rows(report, self._positions.of(messages), pause))

    def show_entry(self, entry_id: str) -> None:
        """Select and show the transcript row holding the entry (a tool card holds its call
        and its result); a synthetic entry (the digest) is no row of the transcript: its text
        as the request sends it opens instead."""
        if not entry_id:
            self._show_digest()
            return
        model = self.window.transcript_model
        for i, row in enumerate(model.rows()):
            ids = {row.message.id if row.message is not None else "",
                   row.result.id if row.result is not None else ""}
            if entry_id in ids:
                view = self.window.transcript
                index = model.index(i)
                view.selectionModel().setCurrentIndex(
                    index, QItemSelectionModel.SelectionFlag.ClearAndSelect)
                view.scrollTo(index)
                return

    def _show_digest(self) -> None:
        text = next((m["content"] for m in self._sent if isinstance(m, dict)
                     and isinstance(m.get("content"), str)
                     and m["content"].startswith(DIGEST_MARK)), None)
        if text is not None:
            self.window.show_output(
                "The context digest", "What this request sends in place of the entries it "
                "leaves out, word for word as the model reads it (made without any LLM).",
                text, wrap=True)

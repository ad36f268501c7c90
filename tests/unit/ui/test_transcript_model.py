from __future__ import annotations

from typing import Any

from pytestqt.modeltest import ModelTester

from core.model import ConversationMessage
from tests.helpers.trajectories import make_conversation
from ui.transcript_model import RowKind, TranscriptModel, main_argument


def messages(raw: list[dict[str, Any]]) -> list[ConversationMessage]:
    return [ConversationMessage.from_openai(m) for m in raw]


def test_model_passes_the_qt_model_tester(qtmodeltester: ModelTester) -> None:
    model = TranscriptModel()
    model.set_messages(messages(make_conversation(10, seed=4)))
    qtmodeltester.check(model)
    model.begin_streaming()
    model.add_stream_text("partial")
    model.flush_stream()
    model.append_message(ConversationMessage(role="assistant", content="done"))
    model.toggle_expanded(0)
    qtmodeltester.check(model)


def test_tool_calls_become_cards_that_carry_their_results() -> None:
    model = TranscriptModel()
    model.set_messages(messages([
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\": \"src/app.py\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "print('hi')"},
        {"role": "assistant", "content": "It prints hi."},
    ]))
    kinds = [r.kind for r in model.rows()]
    assert kinds == [RowKind.USER, RowKind.TOOL, RowKind.ASSISTANT]
    card = model.row(1)
    assert card.call is not None and main_argument(card.call) == "src/app.py"
    assert card.result is not None and card.result.text() == "print('hi')"


def test_a_result_arriving_later_fills_its_card_in_place() -> None:
    model = TranscriptModel()
    model.set_messages(messages([
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "run_shell", "arguments": "{}"}}]},
    ]))
    before = model.rowCount()
    model.append_message(ConversationMessage(role="tool", tool_call_id="c9", content="ok"))
    assert model.rowCount() == before and model.row(1).result is not None


def test_streaming_row_is_replaced_by_the_stored_answer() -> None:
    model = TranscriptModel()
    model.set_messages(messages([{"role": "user", "content": "hi"}]))
    model.begin_streaming()
    model.add_stream_text("Hel")
    model.add_stream_text("lo")
    assert (row := model.streaming_row()) is not None and row.text == "Hello"
    model.finish_streaming(ConversationMessage(role="assistant", content="Hello"))
    assert [r.kind for r in model.rows()] == [RowKind.USER, RowKind.ASSISTANT]


def test_an_entry_appended_while_a_row_streams_goes_before_it_and_the_text_stays() -> None:
    model = TranscriptModel()
    model.set_messages(messages([{"role": "user", "content": "hi"}]))
    model.begin_streaming()
    model.add_stream_text("Hel")
    model.append_message(ConversationMessage(role="system", kind="summary", content="sum"))
    model.add_stream_text("lo")
    assert [r.kind for r in model.rows()] == [RowKind.USER, RowKind.SYSTEM, RowKind.STREAMING]
    assert (row := model.streaming_row()) is not None and row.text == "Hello"
    assert model.row(0).superseded  # the summary stands after it now
    model.finish_streaming(ConversationMessage(role="assistant", content="Hello"))
    assert [r.kind for r in model.rows()] == [RowKind.USER, RowKind.SYSTEM, RowKind.ASSISTANT]


def test_a_continuation_joins_the_answer_it_continues() -> None:
    from core.model import ErrorInfo

    model = TranscriptModel()
    cut = ConversationMessage(role="assistant", kind="error", content="First half, ",
                              error=ErrorInfo(type="network", message="lost"))
    model.set_messages(messages([{"role": "user", "content": "go"}]) + [cut])
    again = ConversationMessage(role="assistant", kind="error", content="second part, ",
                                continues=cut.id, error=ErrorInfo(type="stopped", message="stop"))
    model.append_message(again)
    assert model.rowCount() == 2 and model.row(1).kind is RowKind.ERROR
    done = ConversationMessage(role="assistant", content="and the end.", continues=again.id)
    model.append_message(done)
    assert model.rowCount() == 2
    assert model.row(1).kind is RowKind.ASSISTANT
    assert model.row(1).text == "First half, second part, and the end."
    reloaded = TranscriptModel()
    reloaded.set_messages(messages([{"role": "user", "content": "go"}]) + [cut, again, done])
    assert [r.text for r in reloaded.rows()] == ["go", "First half, second part, and the end."]

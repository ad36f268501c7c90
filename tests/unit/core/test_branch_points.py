"""Where Regenerate branches (core.store.branches.asked_at): at the entry the answer's request
ended in, so the branch keeps everything the answer was based on."""

from __future__ import annotations

from core.model import ConversationMessage, ErrorInfo, FunctionCall, ToolCall, annotation
from core.store.branches import asked_at


def user(text: str = "hi") -> ConversationMessage:
    return ConversationMessage(role="user", content=text)


def answer(text: str, calls: tuple[str, ...] = (), continues: str | None = None
           ) -> ConversationMessage:
    return ConversationMessage(
        role="assistant", content=text or None, continues=continues,
        tool_calls=[ToolCall(id=c, function=FunctionCall(name="read_file", arguments="{}"))
                    for c in calls] or None)


def result(call: str) -> ConversationMessage:
    return ConversationMessage(role="tool", content="ok", tool_call_id=call, name="read_file")


def failed(text: str = "") -> ConversationMessage:
    return ConversationMessage(role="assistant", kind="error", content=text,
                               error=ErrorInfo(type="stopped", message="Stopped by you."))


def test_an_answer_branches_at_the_users_message_or_the_results_it_followed() -> None:
    question, calls, r1, r2, done = (user(), answer("", ("c1", "c2")), result("c1"),
                                     result("c2"), answer("Done."))
    log = [question, calls, r1, r2, done]
    assert asked_at(log, calls.id) is question
    assert asked_at(log, done.id) is r2  # the whole batch comes along
    assert asked_at(log, r1.id) is r1
    assert asked_at(log, "nope") is None
    assert asked_at([done], done.id) is None


def test_a_retried_answer_passes_over_the_failed_ones_retry_left_out() -> None:
    question, boom, again = user(), failed(), answer("Paris.")
    assert asked_at([question, boom, annotation(boom.id, "pin"), again], again.id) is question


def test_an_answer_after_an_answer_branches_at_the_one_it_followed() -> None:
    """A run asks again after an answer that did not complete its step (the nudge is not
    stored): that answer is part of what the next one was based on."""
    start, looked, again = user("Run the workflow"), answer("I looked around."), \
        answer("Still looking.")
    log = [start, looked, annotation(start.id, "pin"), again]  # an aside changes nothing
    assert asked_at(log, again.id) is looked
    assert asked_at(log, looked.id) is start


def test_a_continued_answer_branches_where_the_answer_it_continues_was_asked() -> None:
    question, cut = user(), failed("Partial ans")
    rest = answer("wer.", continues=cut.id)
    assert asked_at([question, cut, rest], rest.id) is question
    long = answer("Cut by the output limit")  # an answer cut by the limit, not an error
    more = answer(" and the rest.", continues=long.id)
    assert asked_at([question, long, more], more.id) is question

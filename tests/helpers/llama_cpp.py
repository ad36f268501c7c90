"""The loopback server as llama-cpp-python 0.3's server behaves with `--chat_format
chatml-function-calling` (FakeLLMServer.llama_cpp_python), for what a local-model user hits:

- the tools reach the model only with a `tool_choice` ("Case 1: No tool choice by user"
  renders none): without one, the model answers in prose, and a count leaves them out;
- an assistant tool-call message without `content` is HTTP 500 ("'dict object' has no attribute
  'content'", its template reads it), `null` too ("Input should be a valid string"); "" is read;
- a new request ends a running stream (its connection dropped mid-answer);
- no usage in streams, and a streamed request with tools an empty 200 ("Automatic streaming tool
  choice is not supported"; the same request unstreamed is answered); a prompt over `n_ctx` an
  empty 200 streamed (FakeLLMServer.n_ctx does that for every profile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.helpers.fake_llm import FakeLLMServer, HttpError


def received(server: FakeLLMServer, body: dict[str, Any]
             ) -> tuple[HttpError | None, dict[str, Any]]:
    """(the server's refusal of `body` or None, the body as the model reads it)."""
    from tests.helpers.fake_llm import Answer, HttpError, ToolCalls

    server.stream_usage = False
    server.no_streamed_tools = True
    with server._lock:  # a new request: the running stream ends
        for ended in server._running:
            ended.set()
            server.cut_streams += 1
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or not message.get("tool_calls"):
            continue
        if "content" not in message:
            return HttpError(500, "'dict object' has no attribute 'content'"), body
        if message["content"] is None:
            return HttpError(500, "1 validation error for ChatCompletionRequestAssistantMessage"
                             "\ncontent\n  Input should be a valid string"), body
    if body.get("tools") and not body.get("tool_choice"):
        body = {k: v for k, v in body.items() if k != "tools"}
        with server._lock:  # the model never saw them: it cannot call them
            if server._replies and isinstance(server._replies[0], ToolCalls):
                server._replies[0] = Answer("I cannot open files, but I can help otherwise.")
    return None, body

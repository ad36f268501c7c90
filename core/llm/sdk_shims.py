"""One measured shortcut through the openai SDK, which litellm uses for OpenAI-style providers.

Before it sends a chat request, the SDK walks every message against its TypedDicts to apply key
aliases and value formats (`openai._utils._transform`). Chat messages have neither, so the walk
returns what it was given; but it is type-driven Python over every part of every message, and
over the hundreds of messages of a long conversation's request it was most of the time from Send
to the request on the wire, spent on the engine's thread while the window waits for the
interpreter.

`install()` checks, on the SDK as installed, that no type a chat message can hold carries an
alias or a format; only then does the chat `create` call pass the messages through as they are
(every other parameter still goes through the SDK's transform). If a later SDK adds one, the
check fails and nothing is changed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

_MARK = "_workbench_messages_as_they_are"


def transforms(tp: Any, seen: set[int] | None = None) -> bool:
    """Whether the openai SDK's transform could change data of type `tp`: an alias or a
    format (`PropertyInfo`) anywhere inside it."""
    from openai._utils import PropertyInfo
    from openai._utils._compat import is_typeddict

    seen = set() if seen is None else seen
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        if any(isinstance(e, PropertyInfo) and (e.alias or e.format) for e in extras):
            return True
        return transforms(base, seen)
    if isinstance(tp, type) and is_typeddict(tp):
        hints = get_type_hints(tp, include_extras=True)
        return any(transforms(h, seen) for h in hints.values())
    return any(transforms(arg, seen) for arg in get_args(tp))


def install() -> bool:
    """Let chat requests' messages through the SDK untransformed when that is provably the
    same. Returns whether the shortcut is in place."""
    try:
        from openai.resources.chat.completions import completions as module
        from openai.types.chat import ChatCompletionMessageParam
    except ImportError:
        return False
    original = getattr(module, "async_maybe_transform", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True
    if transforms(ChatCompletionMessageParam):
        return False
    setattr(module, "async_maybe_transform", _passing_messages(original))  # noqa: B010
    return True


def _passing_messages(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def transform(data: object, expected_type: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            rest = await original({k: v for k, v in data.items() if k != "messages"},
                                  expected_type)
            return {"messages": data["messages"], **rest}
        return await original(data, expected_type)

    setattr(transform, _MARK, True)
    return transform

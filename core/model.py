"""The conversation log's value types.

`ConversationMessage` is a superset of an OpenAI chat message: the protocol fields convert to
`messages[]` without losing tool-call structure, and the extra fields carry what the context
engine and the window need (identity, context flags, result metadata). Messages are plain values;
ids, files and indexes are the store's business.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from core.redact import redact_optional

Role = Literal["system", "user", "assistant", "tool"]
Kind = Literal["message", "summary", "error", "notice", "annotation"]
# What an annotation entry does to its target (see `apply_annotations`).
ANNOTATIONS = {"pin": ("pinned", True), "unpin": ("pinned", False),
               "exclude": ("include_in_context", False), "include": ("include_in_context", True)}
Mode = Literal["chat", "agent", "run"]
Status = Literal["ok", "error", "denied", "aborted"]
ErrorType = Literal[
    "auth",
    "rate_limited",
    "timeout",
    "network",
    "stream_interrupted",
    "context_overflow",
    "provider_error",
    "unknown_model",
    "missing_api_key",
    "stopped",
    "max_tokens",
    "app_closed",
    "save_failed",
    "step_limit",
    "cost_cap",
    "nothing_to_send",
]

PROTOCOL_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")
PAUSES = ("step_limit", "cost_cap")  # an agent turn paused between rounds: Continue goes on


class InvalidMessage(ValueError):
    """An OpenAI-format message that cannot be represented faithfully."""


# --- ids ---------------------------------------------------------------------------------------

_id_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_id() -> str:
    """A UUIDv7-style id: 32 hex chars that sort by creation time, unique within the process.

    The first 12 hex digits are the Unix time in milliseconds; a 12-bit counter keeps ids made in
    the same millisecond ordered; the rest is random.
    """
    global _last_ms, _seq
    with _id_lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:  # counter exhausted: borrow the next millisecond
                ms += 1
                _seq = 0
        else:
            _seq = 0
        _last_ms = ms
        seq = _seq
    rand = int.from_bytes(os.urandom(8), "big") & 0x3FFF_FFFF_FFFF_FFFF
    value = (ms << 80) | (0x7 << 76) | (seq << 64) | (0x2 << 62) | rand
    return f"{value:032x}"


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- content parts (a union discriminated on `type`) -------------------------------------------


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    type: str

    @model_serializer(mode="wrap")
    def _always_typed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The discriminator must reach disk even when defaults are left out of a log line;
        # without it the line cannot be read back.
        data: dict[str, Any] = handler(self)
        return {"type": self.type, **data}


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str


class ImageUrl(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    url: str
    detail: str | None = None
    # An attached image's (core.attachments): never sent, the request carries the image.
    name: str | None = None
    width: int | None = None
    height: int | None = None
    bytes: int | None = None


class ImagePart(_Part):
    type: Literal["image_url"] = "image_url"
    image_url: ImageUrl | str  # litellm also takes the URL as a plain string


class InputAudioPart(_Part):
    type: Literal["input_audio"] = "input_audio"
    input_audio: dict[str, Any]


class FilePart(_Part):
    type: Literal["file"] = "file"
    file: dict[str, Any]


class RefusalPart(_Part):
    type: Literal["refusal"] = "refusal"
    refusal: str


class OtherPart(_Part):
    """A part of a kind we do not model (a provider's extension): kept verbatim."""


_PART_KINDS = ("text", "image_url", "input_audio", "file", "refusal")
# The part kinds litellm lets through (its `ValidUserMessageContentTypes`; a test keeps the two
# the same): an entry holding any other kind cannot be sent at all, litellm refuses the whole
# request before it leaves the machine.
SENDABLE_PART_KINDS = frozenset({
    "text", "image_url", "input_audio", "audio_url", "document", "guarded_text",
    "grounding_source", "query", "video_url", "file", "refusal"})


def _part_kind(value: Any) -> str:
    """The tag of a content part. Lines written before parts kept their `type` on disk are
    recognised by the one payload key they carry."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if kind is None and isinstance(value, dict):
        kind = next((k for k in _PART_KINDS if k in value), None)
    return kind if kind in _PART_KINDS else "other"


ContentPart = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ImagePart, Tag("image_url")]
    | Annotated[InputAudioPart, Tag("input_audio")]
    | Annotated[FilePart, Tag("file")]
    | Annotated[RefusalPart, Tag("refusal")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_kind),
]
Content = str | list[ContentPart]


# --- tool calls --------------------------------------------------------------------------------


class FunctionCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    arguments: str = ""  # JSON text, exactly as the model produced it (possibly malformed)


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


# --- metadata ----------------------------------------------------------------------------------


class ErrorInfo(BaseModel):
    """Why a turn failed, in plain words, with the provider's raw text kept aside."""

    model_config = ConfigDict(frozen=True)
    type: ErrorType
    message: str
    retryable: bool = False
    partial: bool = False
    details: str | None = None
    retry_after: float | None = None

    @field_validator("message", "details")
    @classmethod
    def _no_secrets(cls, value: str | None) -> str | None:
        # A provider may echo the key it was given; nothing key-shaped is ever stored.
        return redact_optional(value)


RunAction = Literal["start", "pause", "resume", "skip", "redo", "abort"]


class RunEvent(BaseModel):
    """What a run's control entry records (see core.workflows.state).

    Attributes:
        action: start | pause | resume | skip (the step) | redo (the step, and the ones after
            it start over) | abort.
        step_id: the step skipped or redone.
        workflow: the workflow as it was started (start), so editing its file later never
            changes a run under way.
        goal: what the user asked the run to achieve (start), when they said.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
    action: RunAction
    step_id: str | None = None
    workflow: dict[str, Any] | None = None
    goal: str | None = None


class Offload(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    size: int


class Measured(BaseModel):
    """A size as it was measured when the entry was made, kept with it so it reads the same
    later: the calibration against the provider's counts moves after every answer, and a
    figure the user read once ("a 91-token summary") should not.

    Attributes:
        tokens: the figure shown then (our count times `calibration`).
        calibration: the provider's tokens per token of ours it was shown with (1.0: our own
            count, nothing to calibrate against yet).
    """

    model_config = ConfigDict(frozen=True)
    tokens: int
    calibration: float = 1.0


class ConversationMessage(BaseModel):
    """One entry of the log.

    Attributes:
        role, content, tool_calls, tool_call_id, name: the OpenAI protocol fields.
        id, created_at: identity; ids sort by creation time.
        kind: message | summary | error | notice.
        include_in_context, pinned: how the context engine treats the entry.
        token_counts: cached token counts keyed by tiktoken encoding name.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    # protocol
    role: Role
    content: Content | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    # identity
    id: str = Field(default_factory=new_id)
    created_at: datetime = Field(default_factory=utc_now)

    # context
    kind: Kind = "message"
    include_in_context: bool = True
    pinned: bool = False
    mode: Mode | None = None
    run_id: str | None = None
    step_id: str | None = None
    run_event: RunEvent | None = None  # a run's control entry (start, skip, pause ...)
    covers: list[str] | None = None
    target: str | None = None  # an annotation's entry (its content is the action)
    offload: Offload | None = None
    token_counts: dict[str, int] = Field(default_factory=dict)
    continues: str | None = None  # id of the entry whose answer this one continues
    measured: Measured | None = None  # a summary's size in a request, as its notice said

    # result metadata
    model: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None  # USD, from the usage and the price map when made (core.cost)
    error: ErrorInfo | None = None
    tool_name: str | None = None
    duration_ms: int | None = None
    status: Status | None = None
    exit_code: int | None = None  # a command's exit status (run_shell)
    approval: str | None = None  # how a tool call was allowed or denied (see core.tools.runner)
    approval_seal: str | None = None  # the app's own mark on a remembered allowance (see
    #                                   core.approval_seal): only a sealed one is honoured

    @model_validator(mode="after")
    def _check_protocol(self) -> ConversationMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id (the id of the call it answers)")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r}")
        if self.role == "assistant" and self.kind != "error":
            if self.content in (None, "", []) and not self.tool_calls:
                raise ValueError("an assistant message needs content or tool_calls")
        if self.role in ("system", "user") and self.content is None:
            raise ValueError(f"a {self.role} message needs content")
        if self.kind == "error" and self.error is None:
            raise ValueError("an error entry needs its error details")
        if self.kind == "annotation" and (not self.target or self.content not in ANNOTATIONS):
            raise ValueError("an annotation needs a target entry and one of "
                             + ", ".join(ANNOTATIONS) + " as its content")
        return self

    # --- conversions ---------------------------------------------------------------------------

    def text(self) -> str:
        """The readable text of the content (text parts joined), '' when there is none."""
        return content_text(self.content)

    def unsendable_part(self) -> str | None:
        """The kind of the first content part no provider takes (one imported from elsewhere),
        or None when every part can be sent."""
        if not isinstance(self.content, list):
            return None
        return next((p.type for p in self.content if p.type not in SENDABLE_PART_KINDS), None)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat message: protocol fields only, None fields left out where allowed."""
        out: dict[str, Any] = {"role": self.role}
        if isinstance(self.content, list):
            out["content"] = [p.model_dump(mode="json", exclude_unset=True) for p in self.content]
        else:
            out["content"] = self.content
        if self.tool_calls:
            out["tool_calls"] = [tc.model_dump() for tc in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role in ("user", "assistant", "system"):
            out["name"] = self.name
        if self.role == "assistant" and out["content"] in ("", []) and self.tool_calls:
            out["content"] = None
        return out

    @classmethod
    def from_openai(cls, data: Any, **extra: Any) -> ConversationMessage:
        """Parse one OpenAI-format message dict; `extra` sets non-protocol fields.

        Raises:
            InvalidMessage: with a sentence that says what is wrong.
        """
        if not isinstance(data, dict):
            raise InvalidMessage(f"a message must be a JSON object, not {type(data).__name__}")
        fields = {k: data[k] for k in PROTOCOL_FIELDS if k in data}
        if "function_call" in data and "tool_calls" not in data:
            # legacy single function call: keep it as a tool call so nothing is lost
            fc = data["function_call"] or {}
            fields["tool_calls"] = [{"id": f"call_{new_id()[:24]}", "function": fc}]
        for call in fields.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                args = call["function"].get("arguments")
                if args is not None and not isinstance(args, str):
                    raise InvalidMessage("tool call arguments must be a JSON string")
        try:
            return cls.model_validate({**fields, **extra})
        except ValidationError as e:
            raise InvalidMessage(_first_error(e)) from e


def annotation(target: str, action: str) -> ConversationMessage:
    """The entry that pins, unpins, excludes or includes `target` (appended; never rewritten)."""
    return ConversationMessage(role="system", kind="annotation", content=action, target=target)


def apply_annotations(messages: list[ConversationMessage]) -> list[ConversationMessage]:
    """The log as it stands after its annotations: each target carries the latest pin and
    exclusion said of it. The annotation entries stay in the list (exports keep them; the
    context and the transcript leave them out). Returns `messages` itself when it has none."""
    changes: dict[str, dict[str, bool]] = {}
    for m in messages:
        if m.kind == "annotation" and m.target and isinstance(m.content, str):
            field, value = ANNOTATIONS[m.content]
            changes.setdefault(m.target, {})[field] = value
    if not changes:
        return messages
    out = []
    for m in messages:
        update = changes.get(m.id)
        if update and any(getattr(m, k) != v for k, v in update.items()):
            m = m.model_copy(update=update)
        out.append(m)
    return out


APP_CLOSED_MESSAGE = ("The app closed while this answer was arriving. The text received is "
                      "kept; Continue resumes it.")


def app_closed_entry(text: str) -> ConversationMessage:
    """The entry an answer becomes when the app closed while it was arriving."""
    return ConversationMessage(
        role="assistant", kind="error", content=text, status="aborted",
        error=ErrorInfo(type="app_closed", retryable=True, partial=bool(text),
                        message=APP_CLOSED_MESSAGE))


def pending_entry(text: str) -> ConversationMessage:
    """How a read-only view shows an answer a crashed app was receiving (never written)."""
    return ConversationMessage(
        role="assistant", kind="error", content=text, status="aborted",
        error=ErrorInfo(type="app_closed", partial=bool(text),
                        message="Pending: an app closed while this answer was arriving. It "
                                "becomes an entry when the project is opened for writing."))


def content_text(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()) if x != "__root__")
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


# Causes where continuing cannot help: the request itself must change first.
NOT_CONTINUABLE = frozenset({"auth", "missing_api_key", "unknown_model", "context_overflow",
                             "save_failed", "nothing_to_send"})


def continuable(entry: ConversationMessage | None) -> bool:
    """Whether Continue applies to this entry: an answer that was stopped, cut or interrupted
    for a reason that continuing can get past, with some text to continue from (without any,
    continuing is Retry under another name)."""
    if entry is None or entry.role != "assistant":
        return False
    if entry.error is not None and entry.error.type in PAUSES:
        return True  # the agent paused (step limit, cost cap): continuing lets it go on
    if not entry.text():
        return False
    if entry.kind == "error":
        return entry.error is not None and entry.error.type not in NOT_CONTINUABLE
    return entry.finish_reason == "length"

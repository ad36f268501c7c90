"""Our error types for everything that can go wrong talking to a model.

The transports' exceptions (litellm's, the openai SDK's) are translated into these in one place
(`translate.translate_error`, each transport naming the kind of failure), so no other module
imports litellm's or the SDK's types. Each error knows its `type` (the persisted ErrorInfo.type),
whether retrying could help, and a plain-words message with the next step; the provider's raw
text is kept in `details`.
"""

from __future__ import annotations

from core.model import ErrorInfo, ErrorType


class LLMError(Exception):
    """Base: `str(e)` is the plain-words message for the user."""

    type: ErrorType = "provider_error"
    retryable = False

    def __init__(
        self, message: str, *, details: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def info(self, partial: bool = False) -> ErrorInfo:
        return ErrorInfo(
            type=self.type,
            message=self.message,
            retryable=self.retryable,
            partial=partial,
            details=self.details,
            retry_after=self.retry_after,
        )


class AuthError(LLMError):
    type: ErrorType = "auth"


class MissingApiKey(AuthError):
    type = "missing_api_key"


class UnknownModel(LLMError):
    type = "unknown_model"


class RateLimited(LLMError):
    type = "rate_limited"
    retryable = True


class LLMTimeout(LLMError):
    type = "timeout"
    retryable = True


class NetworkError(LLMError):
    type = "network"
    retryable = True


class StreamInterrupted(LLMError):
    type = "stream_interrupted"
    retryable = True


class AnswerTooLarge(LLMError):
    """The answer grew past what one answer may be (see answer.MAX_ANSWER_CHARS): cut there,
    like an answer that reached its output limit (Continue resumes it). Never retried on its
    own: a model stuck in a loop would only loop again."""

    type = "max_tokens"
    retryable = False


class ContextOverflow(LLMError):
    """The request was longer than the model accepts. `limit` is the model's stated limit."""

    type = "context_overflow"

    def __init__(self, message: str, *, details: str | None = None, limit: int | None = None,
                 prompt_tokens: int | None = None):
        super().__init__(message, details=details)
        self.limit = limit
        # The provider's own count of the refused request's messages, where it said it (vLLM,
        # llama.cpp: "(3060 in the messages, ...)"; OpenAI: "your messages resulted in N").
        self.prompt_tokens = prompt_tokens


class ProviderError(LLMError):
    type = "provider_error"

    def __init__(self, message: str, *, details: str | None = None, status: int | None = None):
        super().__init__(message, details=details)
        self.status = status
        self.retryable = status is None or status >= 500


class ToolsUnsupported(ProviderError):
    """The model (or its server) refuses requests that offer tools."""

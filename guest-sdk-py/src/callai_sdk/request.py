"""Building a ctx.callAI request, and the RFC 0248 §B retry policy."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .errors import RetryError

MAX_ATTEMPTS = 16
"""The most provider requests one call may ask for."""


@dataclass(frozen=True)
class Retry:
    """Narrow what the host does for one call (honoured only when
    ``call_accounting().retry_policy``). Checked when built: a
    ``max_attempts`` outside 1..16 raises ``RetryError`` here."""

    attempt_cap: int | None = None
    """The cap set, if any."""
    grows_max_tokens: bool | None = None
    """Whether truncation retries may grow the budget (``None``: the host's default, yes)."""

    @staticmethod
    def off() -> Retry:
        """Host retries off: one request, no budget growth."""
        return Retry(attempt_cap=1, grows_max_tokens=False)

    def max_attempts(self, n: int) -> Retry:
        """At most ``n`` provider requests (1..16; 1 turns host retries off)."""
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_ATTEMPTS:
            raise RetryError(n)
        return replace(self, attempt_cap=n)

    def grow_max_tokens(self, grow: bool) -> Retry:
        """``False``: a truncation retry keeps the request's max_tokens."""
        return replace(self, grows_max_tokens=grow)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.attempt_cap is not None:
            out["maxAttempts"] = self.attempt_cap
        if self.grows_max_tokens is not None:
            out["growMaxTokens"] = self.grows_max_tokens
        return out


@dataclass(frozen=True)
class Tool:
    """A tool the model may call; the host checks every call against
    ``parameters`` (a JSON Schema of the arguments, an object schema)."""

    name: str
    parameters: Any
    description: str | None = None
    strict: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description is not None:
            out["description"] = self.description
        if self.strict is not None:
            out["strict"] = self.strict
        return out


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made: its arguments as JSON text."""

    id: str
    name: str
    arguments: str

    @staticmethod
    def from_json(v: dict[str, Any]) -> ToolCall:
        return ToolCall(id=v["id"], name=v["name"], arguments=v["arguments"])

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Image:
    """An image in a user's message: an ``https://`` URL or a
    ``data:image/...;base64,...`` URL; ``detail`` (``auto``, ``low``,
    ``high``) where the provider takes it."""

    url: str
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.url}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class Request:
    """A ctx.callAI request, built step by step; each step returns a new one."""

    _provider: str | None = None
    _model: str | None = None
    _system: str | None = None
    _messages: tuple[tuple[str, str, tuple[ToolCall, ...], str | None, tuple[Image, ...]], ...] = ()
    _temperature: float | None = None
    _max_tokens: int | None = None
    _stop: tuple[str, ...] = ()
    _schema: Any = None
    _retry: Retry | None = None
    _has_schema: bool = field(default=False)
    _tools: tuple[Tool, ...] = ()
    _tool_choice: str | None = None
    _parallel_tool_calls: bool | None = None

    def provider(self, name: str) -> Request:
        return replace(self, _provider=name)

    def model(self, name: str) -> Request:
        return replace(self, _model=name)

    def system(self, prompt: str) -> Request:
        return replace(self, _system=prompt)

    def message(self, role: str, content: str) -> Request:
        return replace(self, _messages=self._messages + ((role, content, (), None, ()),))

    def tool(self, tool: Tool) -> Request:
        """Offers the model a tool; its calls come back checked (``Response.tool_calls``)."""
        return replace(self, _tools=self._tools + (tool,))

    def tool_choice(self, choice: str) -> Request:
        """``auto``, ``none``, ``required`` or a tool's name: whether and which
        tool the model must call. A forced call is native structured output."""
        return replace(self, _tool_choice=choice)

    def parallel_tool_calls(self, allowed: bool) -> Request:
        """``False``: at most one tool call per answer."""
        return replace(self, _parallel_tool_calls=allowed)

    def tool_calls(self, content: str, calls: list[ToolCall]) -> Request:
        """Appends the assistant's turn that called ``calls`` (with its text, if any)."""
        return replace(self, _messages=self._messages + (("assistant", content, tuple(calls), None, ()),))

    def tool_result(self, call_id: str, content: str) -> Request:
        """Appends a tool's result, answering the call ``call_id``."""
        return replace(self, _messages=self._messages + (("tool", content, (), call_id, ()),))

    def user(self, content: str) -> Request:
        return self.message("user", content)

    def user_with_images(self, content: str, images: list[Image]) -> Request:
        """Appends a user message with ``images`` after its text: for a model
        that sees, on a provider whose section does not say ``vision = false``."""
        return replace(self, _messages=self._messages + (("user", content, (), None, tuple(images)),))

    def assistant(self, content: str) -> Request:
        return self.message("assistant", content)

    def temperature(self, t: float) -> Request:
        return replace(self, _temperature=t)

    def max_tokens(self, n: int) -> Request:
        return replace(self, _max_tokens=n)

    def stop(self, sequence: str) -> Request:
        return replace(self, _stop=self._stop + (sequence,))

    def schema(self, schema: Any) -> Request:
        """A JSON Schema: the call becomes structured and carries ``data``."""
        return replace(self, _schema=schema, _has_schema=True)

    def retry(self, retry: Retry) -> Request:
        return replace(self, _retry=retry)

    @property
    def requested_max_tokens(self) -> int | None:
        """The output budget set, if any."""
        return self._max_tokens

    @property
    def requested_retry(self) -> Retry | None:
        """The retry policy set, if any."""
        return self._retry

    def to_json(self) -> dict[str, Any]:
        """The spec's wire JSON (camelCase), as ``call_json`` takes it."""
        out: dict[str, Any] = {}
        if self._provider is not None:
            out["provider"] = self._provider
        if self._model is not None:
            out["model"] = self._model
        if self._system is not None:
            out["systemPrompt"] = self._system
        out["messages"] = [message(*m) for m in self._messages]
        if self._temperature is not None:
            out["temperature"] = self._temperature
        if self._max_tokens is not None:
            out["maxTokens"] = self._max_tokens
        if self._stop:
            out["stopSequences"] = list(self._stop)
        if self._has_schema:
            out["responseSchema"] = self._schema
        if self._retry is not None:
            out["retry"] = self._retry.to_json()
        if self._tools:
            out["tools"] = [t.to_json() for t in self._tools]
        if self._tool_choice is not None:
            out["toolChoice"] = self._tool_choice
        if self._parallel_tool_calls is not None:
            out["parallelToolCalls"] = self._parallel_tool_calls
        return out


def message(
    role: str, content: str, calls: tuple[ToolCall, ...], call_id: str | None, images: tuple[Image, ...]
) -> dict[str, Any]:
    """One message's wire JSON."""
    out: dict[str, Any] = {"role": role, "content": content}
    if calls:
        out["toolCalls"] = [c.to_json() for c in calls]
    if call_id is not None:
        out["toolCallId"] = call_id
    if images:
        out["images"] = [i.to_json() for i in images]
    return out

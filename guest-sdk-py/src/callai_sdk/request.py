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
class Request:
    """A ctx.callAI request, built step by step; each step returns a new one."""

    _provider: str | None = None
    _model: str | None = None
    _system: str | None = None
    _messages: tuple[tuple[str, str], ...] = ()
    _temperature: float | None = None
    _max_tokens: int | None = None
    _stop: tuple[str, ...] = ()
    _schema: Any = None
    _retry: Retry | None = None
    _has_schema: bool = field(default=False)

    def provider(self, name: str) -> Request:
        return replace(self, _provider=name)

    def model(self, name: str) -> Request:
        return replace(self, _model=name)

    def system(self, prompt: str) -> Request:
        return replace(self, _system=prompt)

    def message(self, role: str, content: str) -> Request:
        return replace(self, _messages=self._messages + ((role, content),))

    def user(self, content: str) -> Request:
        return self.message("user", content)

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
        out["messages"] = [{"role": r, "content": c} for r, c in self._messages]
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
        return out

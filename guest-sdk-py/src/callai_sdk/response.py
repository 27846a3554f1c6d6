"""The result of a successful call, with its RFC 0248 ``attempts``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .request import ToolCall


@dataclass(frozen=True)
class Attempts:
    """What one call cost, over every provider request it made (RFC 0248 §A)."""

    count: int
    output_tokens: int | None
    usage_complete: bool
    structured_output: str | None

    @staticmethod
    def from_json(v: dict[str, Any]) -> Attempts:
        return Attempts(
            count=v["count"],
            output_tokens=v.get("outputTokens"),
            usage_complete=v["usageComplete"],
            structured_output=v.get("structuredOutput"),
        )


class Response:
    """A successful call."""

    def __init__(self, wire: dict[str, Any]):
        self._wire = wire

    @property
    def content(self) -> str | None:
        return self._wire.get("content")

    @property
    def data(self) -> Any:
        """The schema-valid JSON of a structured call (``None`` if absent)."""
        return self._wire.get("data")

    @property
    def has_data(self) -> bool:
        return "data" in self._wire

    @property
    def usage(self) -> dict[str, int] | None:
        return self._wire.get("usage")

    @property
    def finish_reason(self) -> str | None:
        return self._wire.get("finishReason")

    @property
    def model(self) -> str | None:
        return self._wire.get("model")

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The answer's tool calls, each checked against its tool's
        ``parameters`` (empty for a text answer)."""
        return [ToolCall.from_json(c) for c in self._wire.get("toolCalls", [])]

    @property
    def attempts(self) -> Attempts | None:
        """Every provider request this call made; ``None`` when the host does
        not advertise ``callAccounting.attempts``."""
        a = self._wire.get("attempts")
        return None if a is None else Attempts.from_json(a)

    def to_json(self) -> dict[str, Any]:
        return dict(self._wire)

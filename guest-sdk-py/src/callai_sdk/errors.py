"""Errors a pack sees: a failed call, a retry policy refused when built, a
budget that would be exceeded."""

from __future__ import annotations

from typing import Any


class CallError(Exception):
    """A failed ctx.callAI call: ``{code, message, details?}``.

    ``str(error)`` is ``code: text``; ``text`` is the wire message alone.
    """

    def __init__(self, code: str, text: str, details: dict[str, Any] | None = None):
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text
        self.details = details

    @property
    def field(self) -> str | None:
        """``details.field`` of a validation error."""
        f = (self.details or {}).get("field")
        return f if isinstance(f, str) else None

    @property
    def total_attempts(self) -> int | None:
        """Provider requests the host made before giving up."""
        n = (self.details or {}).get("totalAttempts")
        return n if isinstance(n, int) else None

    @property
    def output_tokens(self) -> tuple[int, bool] | None:
        """Output tokens reported over the failed call, and whether complete."""
        d = self.details or {}
        complete = d.get("usageComplete")
        if not isinstance(complete, bool):
            return None
        tokens = d.get("outputTokens")
        return (tokens if isinstance(tokens, int) else 0, complete)

    def to_json(self) -> dict[str, Any]:
        """The wire JSON ``{code, message, details?}``."""
        out: dict[str, Any] = {"code": self.code, "message": self.text}
        if self.details is not None:
            out["details"] = self.details
        return out


class RetryError(ValueError):
    """A ``max_attempts`` outside 1..16, refused when the policy is built."""

    def __init__(self, max_attempts: int):
        super().__init__(f"retry.maxAttempts must be 1..16, got {max_attempts}")
        self.max_attempts = max_attempts


class BudgetError(Exception):
    """A call the budget refused before sending anything."""

    def __init__(self, limit: str, allowed: int, spent: int, needed: int):
        super().__init__(
            f"budget {limit} = {allowed} would be exceeded: {spent} spent, the next call needs {needed} more"
        )
        self.limit = limit
        self.allowed = allowed
        self.spent = spent
        self.needed = needed


class NodeError(Exception):
    """Why a node failed; the host reports its message as the run's error."""

"""ctx.callAI from inside the sandbox."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from .bindings import Err, ai
from .errors import CallError
from .request import Request
from .response import Response

T = TypeVar("T")


@dataclass(frozen=True)
class CallAccounting:
    """What the host advertises under ``aiProviders.callAccounting``."""

    attempts: bool
    retry_policy: bool


def call_accounting() -> CallAccounting:
    """What the host advertises: check before relying on attempts or retry."""
    flags = ai.call_accounting()
    return CallAccounting(attempts=flags.attempts, retry_policy=flags.retry_policy)


def call_json(request: str) -> str:
    """One model completion in the spec's wire JSON: the request as written
    (malformed input reaches the host and is refused there), the result's
    wire JSON back. Raises ``CallError``."""
    try:
        return ai.call_ai_json(request)
    except Err as e:
        error = e.value
        details = None if error.details is None else json.loads(error.details)
        raise CallError(error.code.name.lower(), error.message, details) from None


def dumps(value: Any) -> str:
    """Compact JSON, as the host writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def call(request: Request) -> Response:
    """One model completion. Raises ``CallError`` when the call fails."""
    return Response(json.loads(call_json(dumps(request.to_json()))))


@dataclass(frozen=True)
class Structured(Generic[T]):
    """What ``call_as`` returns: the data as the pack takes it, and the
    whole response (usage, attempts, finish reason)."""

    data: T
    response: Response


def call_as(request: Request, decode: Callable[[Any], T]) -> Structured[T]:
    """One structured call whose data ``decode`` turns into what the pack
    takes (raising when it cannot), with the response."""
    response = call(request)
    return Structured(decode(response.data), response)

"""A per-node budget charged by what calls really cost: provider requests
from ``attempts.count``, output tokens from ``attempts.outputTokens``
(RFC 0248 §A), not by the number of calls. The Rust SDK's ``Budget``, rule
for rule."""

from __future__ import annotations

from dataclasses import dataclass

from .call import call, call_accounting
from .errors import BudgetError, CallError
from .request import MAX_ATTEMPTS, Request, Retry
from .response import Attempts, Response

DEFAULT_MAX_TOKENS = 4000
"""What a request without max_tokens is taken to cost: the host default."""


@dataclass
class Spent:
    """What a node has spent so far."""

    calls: int = 0
    requests: int = 0
    output_tokens: int = 0
    output_tokens_is_floor: bool = False


class Budget:
    """A per-node budget."""

    def __init__(self) -> None:
        self._max_requests: int | None = None
        self._max_output_tokens: int | None = None
        self._default_max_tokens = DEFAULT_MAX_TOKENS
        self._spent = Spent()

    def max_requests(self, n: int) -> Budget:
        """At most ``n`` provider requests for the node."""
        self._max_requests = n
        return self

    def max_output_tokens(self, n: int) -> Budget:
        """At most ``n`` output tokens for the node."""
        self._max_output_tokens = n
        return self

    def default_max_tokens(self, n: int) -> Budget:
        """What a request without max_tokens is taken to cost (default 4000)."""
        self._default_max_tokens = n
        return self

    def spent(self) -> Spent:
        s = self._spent
        return Spent(s.calls, s.requests, s.output_tokens, s.output_tokens_is_floor)

    def remaining_requests(self) -> int | None:
        if self._max_requests is None:
            return None
        return max(0, self._max_requests - self._spent.requests)

    def admit(self, request: Request) -> None:
        """Raises ``BudgetError`` unless one more request and its max_tokens fit."""
        s = self._spent
        if self._max_requests is not None and s.requests >= self._max_requests:
            raise BudgetError("maxRequests", self._max_requests, s.requests, 1)
        if self._max_output_tokens is not None:
            needed = request.requested_max_tokens
            if needed is None:
                needed = self._default_max_tokens
            if s.output_tokens + needed > self._max_output_tokens:
                raise BudgetError("maxOutputTokens", self._max_output_tokens, s.output_tokens, needed)

    def charge(self, attempts: Attempts | None) -> None:
        """Charges one call by its attempts (``None``: one request, a floor)."""
        s = self._spent
        s.calls += 1
        if attempts is None:
            s.requests += 1
            s.output_tokens_is_floor = True
            return
        s.requests += attempts.count
        s.output_tokens += attempts.output_tokens or 0
        s.output_tokens_is_floor = s.output_tokens_is_floor or not attempts.usage_complete

    def charge_error(self, error: CallError) -> None:
        """Charges a failed call: what the host reports it spent."""
        s = self._spent
        s.calls += 1
        # A refusal before any request (validation, policy) costs nothing.
        requests = error.total_attempts or 0
        s.requests += requests
        tokens = error.output_tokens
        if tokens is None:
            s.output_tokens_is_floor = s.output_tokens_is_floor or requests > 0
        else:
            s.output_tokens += tokens[0]
            s.output_tokens_is_floor = s.output_tokens_is_floor or not tokens[1]

    def call(self, request: Request) -> Response:
        """Admits, sends and charges one call; when the host honours
        ``retry``, its max_attempts is narrowed to the requests left. Raises
        ``BudgetError`` (nothing sent) or ``CallError`` (charged)."""
        self.admit(request)
        left = self.remaining_requests()
        if left is not None and call_accounting().retry_policy:
            retry = request.requested_retry or Retry()
            cap = min(retry.attempt_cap if retry.attempt_cap is not None else left, left)
            request = request.retry(retry.max_attempts(min(max(cap, 1), MAX_ATTEMPTS)))
        try:
            response = call(request)
        except CallError as e:
            self.charge_error(e)
            raise
        self.charge(response.attempts)
        return response

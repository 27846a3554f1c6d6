"""Tool calls: a small loop the pack drives. The model asks for tools, the
pack runs them and sends their results back, until the model answers in
text. The loop is the pack's (RFC 0248's unresolved question 2); the host
counts each step's requests in its ``attempts``, and ``ToolLoop`` sums them
into a ``LoopRecord``, charging a ``Budget`` step by step when given one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from .budget import Budget
from .call import call
from .errors import BudgetError, CallError
from .request import Request, ToolCall
from .response import Attempts, Response


def arguments_as(tool_call: ToolCall) -> Any:
    """A tool call's arguments, parsed (the host checked them against the tool's schema)."""
    return json.loads(tool_call.arguments)


@dataclass
class LoopRecord:
    """What a tool loop spent over all its steps."""

    steps: int = 0
    """Calls made: one per step."""
    requests: int = 0
    """Provider requests those calls made (each step's ``attempts.count``)."""
    output_tokens: int | None = None
    """Output tokens summed over every request that reported usage."""
    usage_complete: bool = True
    """False when a request reported no usage: ``output_tokens`` is a floor."""

    def add(self, attempts: Attempts | None) -> None:
        """Adds one step's ``attempts`` (``None``: one request of unknown usage)."""
        self.steps += 1
        if attempts is None:
            self.requests += 1
            self.usage_complete = False
            return
        self.requests += attempts.count
        if attempts.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + attempts.output_tokens
        self.usage_complete = self.usage_complete and attempts.usage_complete

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": self.steps, "requests": self.requests}
        if self.output_tokens is not None:
            out["outputTokens"] = self.output_tokens
        out["usageComplete"] = self.usage_complete
        return out


class LoopError(Exception):
    """How a tool loop ended without an answer: ``record`` says what it spent,
    ``cause`` the step's ``CallError`` or ``BudgetError`` (``None`` when the
    model still called tools after ``max_steps``)."""

    def __init__(self, message: str, record: LoopRecord, cause: Exception | None = None):
        super().__init__(message)
        self.record = record
        self.cause = cause


@dataclass
class LoopAnswer:
    """The loop's answer: the final response, the conversation, what every step cost."""

    response: Response
    conversation: Request
    record: LoopRecord


class ToolLoop:
    """A tool loop over one request (its tools offered at every step)."""

    def __init__(self, request: Request):
        self._request = request
        self._max_steps = 8
        self._budget: Budget | None = None

    def max_steps(self, n: int) -> ToolLoop:
        """At most ``n`` steps (calls)."""
        self._max_steps = max(1, n)
        return self

    def budget(self, budget: Budget) -> ToolLoop:
        """Sends every step through ``budget``: admitted first, charged by what it cost."""
        self._budget = budget
        return self

    def run(self, run_tool: Callable[[ToolCall], str]) -> LoopAnswer:
        """Runs the loop: each tool call goes to ``run_tool``, whose text (or,
        when it raises, ``Error: message``, for the model to recover from) is
        the call's result. Raises ``LoopError``."""
        record = LoopRecord()
        conversation = self._request
        while True:
            if record.steps == self._max_steps:
                raise LoopError(f"the model still called tools after {record.steps} steps", record)
            try:
                response = call(conversation) if self._budget is None else self._budget.call(conversation)
            except BudgetError as e:
                raise LoopError(f"step {record.steps + 1} refused: {e}", record, e) from None
            except CallError as e:
                record.add(failed_attempts(e))
                raise LoopError(f"step {record.steps} failed: {e}", record, e) from None
            record.add(response.attempts)
            calls = response.tool_calls
            if not calls:
                return LoopAnswer(response, conversation, record)
            conversation = conversation.tool_calls(response.content or "", calls)
            for tool_call in calls:
                try:
                    result = run_tool(tool_call)
                except Exception as e:  # the model gets the error to recover from
                    result = f"Error: {e}"
                conversation = conversation.tool_result(tool_call.id, result)


def failed_attempts(e: CallError) -> Attempts:
    """What a failed call's error says it spent, as ``attempts``."""
    spent = e.output_tokens
    return Attempts(
        count=e.total_attempts or 0,
        output_tokens=None if spent is None else spent[0],
        usage_complete=False if spent is None else spent[1],
        structured_output=None,
    )

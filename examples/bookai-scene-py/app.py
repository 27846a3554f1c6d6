"""``bookai.scene.draft`` in Python: the Book AI pack of
examples/bookai-scene, decision for decision, so that on the same scripts it
shows the same estimate and spends the same."""

from __future__ import annotations

import json
from typing import Any

from callai_sdk import (
    Budget,
    BudgetError,
    CallError,
    NodeError,
    Request,
    Response,
    Retry,
    Spent,
    call_accounting,
    log,
    node,
)
from scene import schema, validate

KEYS = {"premise", "maxCalls", "maxOutputTokens", "maxTokens", "hostRetries"}


class Settings:
    def __init__(self, input: dict[str, Any]):
        unknown = next((k for k in input if k not in KEYS), None)
        if unknown is not None:
            raise ValueError(f"unknown field `{unknown}` in the input")
        if not isinstance(input.get("premise"), str):
            raise ValueError("input.premise must be a string")

        def whole(name: str, fallback: int) -> int:
            v = input.get(name, fallback)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"input.{name} must be an integer")
            return v

        self.premise: str = input["premise"]
        self.max_calls = whole("maxCalls", 4)
        self.max_output_tokens = whole("maxOutputTokens", 12000)
        self.max_tokens = whole("maxTokens", 1500)
        flags = call_accounting()
        # Host retries can only be turned off where the host honours `retry`.
        self.own_loop = not input.get("hostRetries", False) and flags.retry_policy
        self.retry_policy = flags.retry_policy

    def estimate(self) -> dict[str, Any]:
        """What the author is shown before the run: the worst case of the plan."""
        m = self.max_tokens
        if self.own_loop:
            return {"calls": 3, "requests": 3, "outputTokens": m + 2 * m + m,
                    "basis": "host retries off: each call is exactly one request"}
        if self.retry_policy:
            return {"calls": 2, "requests": self.max_calls, "outputTokens": None,
                    "basis": "host retries on, each call capped by retry.maxAttempts at the requests left; budgets may grow"}
        return {"calls": 2, "requests": None, "outputTokens": None,
                "basis": "the host does not advertise retryPolicy: it may retry every call; spend is counted from attempts"}

    def request(self, max_tokens: int) -> Request:
        request = (
            Request()
            .system("You draft one scene of a novel. Reply with JSON only: title, scene, characters (names), mood (calm, tense, joyful or melancholy).")
            .user(f"Premise: {self.premise}")
            .max_tokens(max_tokens)
            .schema(schema())
        )
        return request.retry(Retry.off()) if self.own_loop else request


def spent_json(s: Spent) -> dict[str, Any]:
    return {"calls": s.calls, "requests": s.requests, "outputTokens": s.output_tokens,
            "outputTokensIsFloor": s.output_tokens_is_floor}


def failure(settings: Settings, budget: Budget, reason: str) -> Exception:
    """Why the node stopped, with what it estimated and spent."""
    return NodeError(json.dumps({"error": reason, "estimate": settings.estimate(),
                                 "spent": spent_json(budget.spent())}, ensure_ascii=False))


def attempt(budget: Budget, request: Request) -> Response | BudgetError | CallError:
    """A call through the budget: the response, or what stopped it."""
    try:
        return budget.call(request)
    except (BudgetError, CallError) as e:
        return e


@node
def draft_scene(input: dict[str, Any]) -> dict[str, Any]:
    settings = Settings(input)
    budget = Budget().max_requests(settings.max_calls).max_output_tokens(settings.max_output_tokens)
    log.info(f"estimate before the run: {json.dumps(settings.estimate())}")

    # The draft; in the pack's own loop, a truncated draft is asked again
    # once with a doubled budget.
    draft = attempt(budget, settings.request(settings.max_tokens))
    if settings.own_loop and isinstance(draft, CallError) and draft.code == "envelope_truncation_unrecoverable":
        log.info("the draft was truncated: asking again with twice the budget")
        draft = attempt(budget, settings.request(settings.max_tokens * 2))
    # Its own closed-world check; one repair, fed with the error.
    complaint: tuple[str, str] | None
    if isinstance(draft, CallError) and draft.code == "envelope_invalid":
        complaint = (draft.text, "")
    elif isinstance(draft, Exception):
        raise failure(settings, budget, str(draft))
    elif not draft.has_data:
        complaint = ("the reply carried no data", "")
    else:
        why = validate(draft.data)
        complaint = None if why is None else (why, json.dumps(draft.data, separators=(",", ":"), ensure_ascii=False))
    scene = None if isinstance(draft, Exception) else draft.data
    if complaint is not None:
        why, previous = complaint
        log.warn(f"the draft failed validation: {why}")
        repair = settings.request(settings.max_tokens)
        if previous:
            repair = repair.assistant(previous)
        repair = repair.user(f"That scene is not valid: {why}. Reply with a corrected scene, JSON only.")
        repaired = attempt(budget, repair)
        if isinstance(repaired, Exception):
            raise failure(settings, budget, str(repaired))
        scene = repaired.data
        still = validate(scene)
        if still is not None:
            raise failure(settings, budget, f"the repair failed validation too: {still}")
    return {
        "scene": scene,
        "hostRetries": "off" if settings.own_loop else "on",
        "estimate": settings.estimate(),
        "spent": spent_json(budget.spent()),
    }

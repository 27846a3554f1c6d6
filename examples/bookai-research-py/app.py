"""``bookai.research.brief`` in Python: the research agent of
examples/bookai-research, decision for decision, so that on the same
scripts it runs the same tools and spends the same."""

from __future__ import annotations

import json
from typing import Any

from callai_sdk import Budget, LoopError, NodeError, Request, Tool, ToolCall, ToolLoop, arguments_as, node
from notes import read, search

SEARCH = Tool(
    name="search_notes",
    description="Search the book's research notes; returns matching note ids and titles.",
    parameters={
        "type": "object",
        "required": ["query"],
        "additionalProperties": False,
        "properties": {"query": {"type": "string", "minLength": 1}},
    },
)
READ = Tool(
    name="read_note",
    description="Read one research note in full, by its id.",
    parameters={
        "type": "object",
        "required": ["id"],
        "additionalProperties": False,
        "properties": {"id": {"type": "string", "pattern": "^n[0-9]+$"}},
    },
)


def run_tool(tool_call: ToolCall) -> str:
    """Runs one tool call: its result; what it raises goes back as an error."""
    args = arguments_as(tool_call)
    if tool_call.name == "search_notes":
        return json.dumps(search(args["query"]), separators=(",", ":"))
    if tool_call.name == "read_note":
        note = read(args["id"])
        if note is None:
            raise ValueError(f"no note {args['id']}")
        return note
    raise ValueError(f"no tool {tool_call.name}")


def spent_json(budget: Budget) -> dict[str, Any]:
    s = budget.spent()
    return {
        "calls": s.calls,
        "requests": s.requests,
        "outputTokens": s.output_tokens,
        "outputTokensIsFloor": s.output_tokens_is_floor,
    }


@node
def research(input: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(input.get("question"), str):
        raise ValueError("input.question must be a string")
    budget = Budget().max_requests(input.get("maxRequests", 6))
    request = (
        Request()
        .system(
            "You research for a novelist. Find the relevant notes with search_notes, "
            "read them with read_note, then answer in at most three sentences."
        )
        .user(input["question"])
        .max_tokens(600)
        .tool(SEARCH)
        .tool(READ)
    )
    tools_run: list[str] = []

    def run_and_note(tool_call: ToolCall) -> str:
        tools_run.append(tool_call.name)
        return run_tool(tool_call)

    try:
        answer = ToolLoop(request).max_steps(input.get("maxSteps", 5)).budget(budget).run(run_and_note)
    except LoopError as e:
        if e.cause is not None and type(e.cause).__name__ == "CallError":
            raise e.cause from None
        r = e.record
        spent = json.dumps(spent_json(budget), separators=(",", ":"))
        raise NodeError(f"{e} (after {r.steps} steps, {r.requests} requests; budget spent {spent})") from None
    return {
        "brief": answer.response.content or "",
        "toolsRun": tools_run,
        "loop": answer.record.to_json(),
        "spent": spent_json(budget),
    }

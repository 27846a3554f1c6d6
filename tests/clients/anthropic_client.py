"""Drives the official `anthropic` Python client against a callai serve.

argv: BASE_URL PLAN_JSON, as openai_client.py; each call's args go to
client.messages.create unchanged. Prints what the client parsed.
"""

import json
import sys

import anthropic


def main() -> None:
    base, plan = sys.argv[1], json.loads(sys.argv[2])
    client = anthropic.Anthropic(
        base_url=base,
        api_key=plan.get("api_key", "unused"),
        max_retries=plan.get("max_retries", 0),
    )
    out = []
    for call in plan["calls"]:
        try:
            if call.get("stream"):
                stream = client.messages.create(stream=True, **call["args"])
                out.append({"events": [event.model_dump() for event in stream]})
            else:
                raw = client.messages.with_raw_response.create(**call["args"])
                message = raw.parse()
                headers = {k: v for k, v in raw.headers.items() if k.startswith("x-callai-")}
                out.append({"message": message.model_dump(), "headers": headers})
        except anthropic.APIStatusError as e:
            out.append({"error": type(e).__name__, "status": e.status_code, "body": e.body})
    print(json.dumps(out))


main()

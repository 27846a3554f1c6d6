"""Drives the official `openai` Python client against a callai serve.

argv: BASE_URL PLAN_JSON. The plan is {"max_retries": N, "api_key": TOKEN?, "calls": [{"args":
{...}, "stream": bool}]}; each call's args go to
client.chat.completions.create unchanged. Prints, as one JSON array, what the
client itself parsed: the completion (or the stream's chunks) with the
x-callai-* headers, or the typed error it raised.
"""

import json
import sys

import openai


def main() -> None:
    base, plan = sys.argv[1], json.loads(sys.argv[2])
    client = openai.OpenAI(
        base_url=base + "/v1",
        api_key=plan.get("api_key", "unused"),
        max_retries=plan.get("max_retries", 0),
    )
    out = []
    for call in plan["calls"]:
        try:
            if call.get("stream"):
                stream = client.chat.completions.create(stream=True, **call["args"])
                out.append({"chunks": [chunk.model_dump() for chunk in stream]})
            else:
                raw = client.chat.completions.with_raw_response.create(**call["args"])
                completion = raw.parse()
                headers = {k: v for k, v in raw.headers.items() if k.startswith("x-callai-")}
                out.append({"completion": completion.model_dump(), "headers": headers})
        except openai.APIStatusError as e:
            out.append({"error": type(e).__name__, "status": e.status_code, "body": e.body})
        except openai.APIConnectionError as e:
            out.append({"error": type(e).__name__})
    print(json.dumps(out))


main()

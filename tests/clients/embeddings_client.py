"""Drives the `openai` client's embeddings against a callai serve.

argv: BASE_URL SCENARIO [API_KEY]. Prints, as one JSON object, what the
client itself parsed: the embeddings (as the client decoded them) with the
x-callai-* headers, or the typed error it raised.

Scenarios:
  list      embeddings.create with a list of two strings (the client's
            default encoding, base64)
  floats    embeddings.create with one string and encoding_format="float"
"""

import json
import sys

import openai


def main() -> None:
    base, scenario = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else "unused"
    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    args = {"list": {"input": ["first text", "second text"]},
            "floats": {"input": "one text", "encoding_format": "float", "dimensions": 2}}[scenario]
    try:
        raw = client.embeddings.with_raw_response.create(model="p", **args)
        parsed = raw.parse()
        headers = {k: v for k, v in raw.headers.items() if k.startswith("x-callai-")}
        out = {"embeddings": [e.embedding for e in parsed.data], "usage": parsed.usage.model_dump(),
               "model": parsed.model, "callai": getattr(parsed, "callai", None), "headers": headers}
    except openai.APIStatusError as e:
        out = {"error": type(e).__name__, "status": e.status_code, "body": e.body}
    print(json.dumps(out))


main()

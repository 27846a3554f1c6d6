"""Drives the Responses API of a callai serve with the clients people use.

argv: BASE_URL SCENARIO. Prints, as one JSON object, what the client itself
parsed; the fake provider behind the server decides what the model "says",
and the Rust test checks both sides.

Scenarios:
  create    openai: responses.create with a string input (raw, for headers)
  parse     openai: responses.parse with a pydantic text_format
  loop      openai: a two-step function-calling loop, its first call wrong
  stream    openai: responses.stream, every event and the final response
  continue  openai: two turns by previous_response_id, then the first
            retrieved and its input items listed
  refused   openai: a built-in tool, refused by name (the typed error)
  agents    openai-agents: an Agent on its default (Responses) model
  langchain langchain-openai: ChatOpenAI(use_responses_api=True) with one
            tool bound, then with a structured output (json_schema)
"""

import json
import sys

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
QUESTION = "What is the weather in Oslo?"


def client_of(base: str):
    import openai

    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)


def headers_of(raw) -> dict:
    return {k: v for k, v in raw.headers.items() if k.startswith("x-callai-")}


def create(base: str) -> dict:
    client = client_of(base)
    raw = client.responses.with_raw_response.create(
        model="p", instructions="Be brief.", input="Say hi.", max_output_tokens=64,
        metadata={"team": "a"}, store=False,
    )
    response = raw.parse()
    return {"response": response.model_dump(), "output_text": response.output_text,
            "headers": headers_of(raw)}


def parse(base: str) -> dict:
    from pydantic import BaseModel

    class Scene(BaseModel):
        scene: str

    client = client_of(base)
    response = client.responses.parse(model="p", input="A scene.", text_format=Scene)
    return {"parsed": response.output_parsed.model_dump(), "response": response.model_dump()}


def loop(base: str) -> dict:
    client = client_of(base)
    tools = [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": True}]
    items = [{"role": "user", "content": QUESTION}]
    raw = client.responses.with_raw_response.create(model="p", input=items, tools=tools)
    first = raw.parse()
    calls = [item for item in first.output if item.type == "function_call"]
    items += [item.model_dump(exclude_none=True) for item in first.output]
    for call in calls:
        city = json.loads(call.arguments)["city"]
        items.append({"type": "function_call_output", "call_id": call.call_id,
                      "output": f"sunny in {city}"})
    second = client.responses.create(model="p", input=items, tools=tools)
    return {"first": first.model_dump(), "headers": headers_of(raw),
            "second": second.model_dump(), "output_text": second.output_text}


def stream(base: str) -> dict:
    client = client_of(base)
    events = []
    with client.responses.stream(model="p", input="Count.") as s:
        for event in s:
            events.append(event.model_dump())
        final = s.get_final_response()
    return {"events": events, "final": final.model_dump(), "output_text": final.output_text}


def continue_(base: str) -> dict:
    client = client_of(base)
    first = client.responses.create(model="p", input="Where is Oslo?")
    second = client.responses.create(model="p", input="Is it a capital?",
                                     previous_response_id=first.id)
    kept = client.responses.retrieve(first.id)
    items = client.responses.input_items.list(first.id)
    return {"first": first.model_dump(), "second": second.model_dump(),
            "kept": kept.model_dump(), "items": [i.model_dump() for i in items.data]}


def refused(base: str) -> dict:
    import openai

    client = client_of(base)
    try:
        client.responses.create(model="p", input="x", tools=[{"type": "web_search"}])
    except openai.APIStatusError as e:
        return {"error": type(e).__name__, "status": e.status_code, "body": e.body}
    return {"error": None}


def agents_run(base: str) -> dict:
    from agents import Agent, Runner, function_tool, set_default_openai_client
    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(base_url=base + "/v1", api_key="unused",
                                          max_retries=0))

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    # The model is a name only: the SDK's default model class, which speaks
    # the Responses API.
    agent = Agent(name="forecaster", instructions="Answer with the weather tool.",
                  tools=[get_weather], model="p")
    result = Runner.run_sync(agent, QUESTION)
    return {"final_output": result.final_output}


def langchain(base: str) -> dict:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    chat = ChatOpenAI(model="p", base_url=base + "/v1", api_key="unused", max_retries=0,
                      use_responses_api=True)
    called = chat.bind_tools([weather]).invoke(QUESTION)
    schema = {"title": "scene", "description": "A scene", "type": "object",
              "properties": {"scene": {"type": "string"}}, "required": ["scene"],
              "additionalProperties": False}
    parsed = chat.with_structured_output(schema, method="json_schema").invoke("A scene.")
    return {"tool_calls": called.tool_calls, "text": called.text, "parsed": parsed,
            "metadata": called.response_metadata}


SCENARIOS = {
    "create": create,
    "parse": parse,
    "loop": loop,
    "stream": stream,
    "continue": continue_,
    "refused": refused,
    "agents": agents_run,
    "langchain": langchain,
}

if __name__ == "__main__":
    base, scenario = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[scenario](base), default=str))

"""Drives agents against a callai serve, with the clients people run them on.

argv: BASE_URL SCENARIO. Each scenario runs one client's tool use end to end
(the tool itself is a local function: the weather in a city) and prints, as
one JSON object, what the client itself parsed. The fake provider behind the
server decides what the model "says"; the Rust test checks both sides.

Scenarios:
  openai-loop         openai: a two-step function-calling loop
  anthropic-loop      anthropic: the same with tool_use / tool_result
  langchain-tools     langchain-openai: ChatOpenAI.bind_tools
  langchain-openai-structured     ChatOpenAI.with_structured_output(method="function_calling")
  langchain-anthropic-structured  ChatAnthropic.with_structured_output
  agents              openai-agents: an Agent with one function tool, on
                      its chat-completions model
"""

import json
import sys

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city"}},
    "required": ["city"],
    "additionalProperties": False,
}
QUESTION = "What is the weather in Oslo?"


def weather(city: str) -> str:
    return f"sunny in {city}"


def headers_of(raw) -> dict:
    return {k: v for k, v in raw.headers.items() if k.startswith("x-callai-")}


def openai_loop(base: str) -> dict:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    tools = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}}]
    messages = [{"role": "user", "content": QUESTION}]
    raw = client.chat.completions.with_raw_response.create(
        model="p", messages=messages, tools=tools
    )
    first = raw.parse()
    call = first.choices[0].message.tool_calls[0]
    result = weather(**json.loads(call.function.arguments))
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model="p", messages=messages, tools=tools)
    return {
        "first": first.model_dump(),
        "headers": headers_of(raw),
        "second": second.model_dump(),
    }


def anthropic_loop(base: str) -> dict:
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    tools = [{"name": "weather", "description": "The weather in a city", "input_schema": WEATHER}]
    messages = [{"role": "user", "content": QUESTION}]
    raw = client.messages.with_raw_response.create(
        model="p", max_tokens=100, messages=messages, tools=tools
    )
    first = raw.parse()
    use = next(b for b in first.content if b.type == "tool_use")
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": weather(**use.input)}],
        }
    )
    second = client.messages.create(model="p", max_tokens=100, messages=messages, tools=tools)
    return {"first": first.model_dump(), "headers": headers_of(raw), "second": second.model_dump()}


def chat_openai(base: str):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="p", base_url=base + "/v1", api_key="unused", max_retries=0)


def langchain_tools(base: str) -> dict:
    from langchain_core.tools import tool

    @tool
    def weather_tool(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    message = chat_openai(base).bind_tools([weather_tool]).invoke(QUESTION)
    return {"tool_calls": message.tool_calls, "metadata": message.response_metadata}


def langchain_openai_structured(base: str) -> dict:
    schema = {"title": "weather", "description": "The weather asked for", **WEATHER}
    model = chat_openai(base).with_structured_output(schema, method="function_calling")
    return {"parsed": model.invoke(QUESTION)}


def langchain_anthropic_structured(base: str) -> dict:
    from langchain_anthropic import ChatAnthropic

    schema = {"title": "weather", "description": "The weather asked for", **WEATHER}
    chat = ChatAnthropic(model="p", base_url=base, api_key="unused", max_retries=0)
    return {"parsed": chat.with_structured_output(schema).invoke(QUESTION)}


def agents_run(base: str) -> dict:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    client = AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    agent = Agent(
        name="forecaster",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model="p", openai_client=client),
    )
    result = Runner.run_sync(agent, QUESTION)
    return {"final_output": result.final_output}


SCENARIOS = {
    "openai-loop": openai_loop,
    "anthropic-loop": anthropic_loop,
    "langchain-tools": langchain_tools,
    "langchain-openai-structured": langchain_openai_structured,
    "langchain-anthropic-structured": langchain_anthropic_structured,
    "agents": agents_run,
}

if __name__ == "__main__":
    base, scenario = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[scenario](base), default=str))

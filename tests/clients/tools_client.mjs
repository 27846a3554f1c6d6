// Drives the official `openai` npm client through a two-step
// function-calling loop against a callai serve (the tool is a local
// function: the weather in a city).
//
// argv: BASE_URL; OPENAI_MODULE names the installed package's entry.
// Prints, as one JSON object, what the client parsed: both completions and
// the first one's x-callai-* headers.

const { default: OpenAI } = await import(process.env.OPENAI_MODULE);
const [base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
const tools = [{
  type: "function",
  function: {
    name: "weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
}];
const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
const { data: first, response } = await client.chat.completions
  .create({ model: "p", messages, tools })
  .withResponse();
const headers = {};
for (const [k, v] of response.headers) if (k.startsWith("x-callai-")) headers[k] = v;
const call = first.choices[0].message.tool_calls[0];
const { city } = JSON.parse(call.function.arguments);
messages.push(first.choices[0].message);
messages.push({ role: "tool", tool_call_id: call.id, content: `sunny in ${city}` });
const second = await client.chat.completions.create({ model: "p", messages, tools });
console.log(JSON.stringify({ first, headers, second }));

// Drives the official `openai` npm client against a callai serve.
//
// argv: BASE_URL PLAN_JSON, as openai_client.py; OPENAI_MODULE names the
// installed package's entry (node_modules/openai/index.mjs). Prints, as one
// JSON array, what the client parsed: the completion (or the stream's
// chunks) with the x-callai-* headers, or the typed error it threw.

const { default: OpenAI } = await import(process.env.OPENAI_MODULE);
const [base, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: plan.api_key ?? "unused",
  maxRetries: plan.max_retries ?? 0,
});
const out = [];
for (const call of plan.calls) {
  // Extra fields go straight into the body in Node (Python's extra_body).
  const { extra_body: extra, ...args } = call.args;
  call.args = { ...args, ...extra };
  try {
    if (call.stream) {
      const stream = await client.chat.completions.create({ ...call.args, stream: true });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      out.push({ chunks });
    } else {
      const { data, response } = await client.chat.completions.create(call.args).withResponse();
      const headers = {};
      for (const [k, v] of response.headers) if (k.startsWith("x-callai-")) headers[k] = v;
      out.push({ completion: data, headers });
    }
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    out.push({ error: e.constructor.name, status: e.status, body: e.error ?? null });
  }
}
console.log(JSON.stringify(out));

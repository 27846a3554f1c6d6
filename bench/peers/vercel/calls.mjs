// The Vercel AI SDK doing the benchmark's structured calls in one process:
// `--calls N` generateObject calls (a `scene` string, structured outputs
// on) to the OpenAI-compatible server at `--url`, `--concurrency C` at a
// time. Prints one JSON object: wall time, CPU seconds (this process, calls
// only), peak resident memory.
import { generateObject } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const url = arg('url');
const calls = Number(arg('calls', 1000));
const concurrency = Number(arg('concurrency', 200));

const provider = createOpenAICompatible({ name: 'fake', baseURL: url, supportsStructuredOutputs: true });
const model = provider('fake-model');
const schema = z.object({ scene: z.string() });
const prompt = 'Write one sentence of a scene.';
const one = async () => {
  const r = await generateObject({ model, schema, prompt, maxOutputTokens: 200 });
  return r.object.scene;
};

for (let i = 0; i < 10; i++) await one(); // warm up: JIT, connections

let next = 0;
let failures = 0;
const worker = async () => {
  while (next++ < calls) {
    try {
      if (typeof (await one()) !== 'string') failures++;
    } catch {
      failures++;
    }
  }
};
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker));
const wall = (performance.now() - wall0) / 1000;
const used = process.cpuUsage(cpu0);
const cpu = (used.user + used.system) / 1e6;
console.log(JSON.stringify({
  calls, concurrency, failures, wall_s: wall, cpu_s: cpu,
  cpu_ms_per_call: (cpu * 1000) / calls,
  peak_rss_mib: process.resourceUsage().maxRSS / 1024,
}));

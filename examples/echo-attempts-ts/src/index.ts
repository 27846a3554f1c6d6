// `conformance.callai.echo-attempts` in TypeScript: the input, a ctx.callAI
// request in wire JSON, goes verbatim to the host's JSON entry; the output
// echoes the result's attempts, usage, finishReason and content or data, or
// the error of a failed call. The contract of examples/echo-attempts.

import { CallError, callJson, defineRawNode } from '@openwop/callai-sdk';

const ECHOED = ['attempts', 'usage', 'finishReason', 'content', 'data'];

export const run = defineRawNode((input: string): string => {
  try {
    const result = JSON.parse(callJson(input)) as Record<string, unknown>;
    const echoed: Record<string, unknown> = {};
    for (const key of ECHOED) {
      if (key in result) echoed[key] = result[key];
    }
    return JSON.stringify(echoed);
  } catch (e) {
    if (e instanceof CallError) return JSON.stringify({ error: e });
    throw e;
  }
});

// Tool calls: a small loop the pack drives. The model asks for tools, the
// pack runs them and sends their results back, until the model answers in
// text. The loop is the pack's (RFC 0248's unresolved question 2); the host
// counts each step's requests in its `attempts`, and `ToolLoop` sums them
// into a `LoopRecord`, charging a `Budget` step by step when given one.

import type { Budget } from './budget.js';
import { call } from './call.js';
import { BudgetError, CallError } from './errors.js';
import type { Request, ToolCall } from './request.js';
import type { Attempts, Response } from './response.js';

/** A tool call's arguments, parsed (the host checked them against the tool's schema). */
export function argumentsAs<T>(toolCall: ToolCall): T {
  return JSON.parse(toolCall.arguments) as T;
}

/** What a tool loop spent over all its steps. */
export interface LoopRecord {
  /** Calls made: one per step. */
  steps: number;
  /** Provider requests those calls made (each step's `attempts.count`). */
  requests: number;
  /** Output tokens summed over every request that reported usage. */
  outputTokens?: number;
  /** False when a request reported no usage: `outputTokens` is a floor. */
  usageComplete: boolean;
}

/** Adds one step's `attempts` to `record` (undefined: one request of unknown usage). */
export function addStep(record: LoopRecord, attempts: Attempts | undefined): void {
  record.usageComplete = record.steps === 0 ? true : record.usageComplete;
  record.steps += 1;
  if (attempts === undefined) {
    record.requests += 1;
    record.usageComplete = false;
    return;
  }
  record.requests += attempts.count;
  if (attempts.outputTokens !== undefined) {
    record.outputTokens = (record.outputTokens ?? 0) + attempts.outputTokens;
  }
  record.usageComplete &&= attempts.usageComplete;
}

/** How a tool loop ended without an answer: its `record` says what it spent. */
export class LoopError extends Error {
  constructor(
    message: string,
    readonly record: LoopRecord,
    readonly cause?: CallError | BudgetError,
  ) {
    super(message);
    this.name = 'LoopError';
  }
}

/** The loop's answer: the final response, the conversation, what every step cost. */
export interface LoopAnswer {
  response: Response;
  conversation: Request;
  record: LoopRecord;
}

/** A tool loop over one request (its tools offered at every step). */
export class ToolLoop {
  private steps = 8;
  private spend?: Budget;

  constructor(private readonly request: Request) {}

  /** At most `n` steps (calls). */
  maxSteps(n: number): this {
    this.steps = Math.max(1, n);
    return this;
  }

  /** Sends every step through `budget`: admitted first, charged by what it cost. */
  budget(budget: Budget): this {
    this.spend = budget;
    return this;
  }

  /**
   * Runs the loop: each tool call goes to `runTool`, whose text (or, when it
   * throws, `Error: message`, for the model to recover from) is the call's
   * result. Throws a `LoopError` when a step fails, the budget refuses one,
   * or the model still calls tools after `maxSteps`.
   */
  run(runTool: (toolCall: ToolCall) => string): LoopAnswer {
    const record: LoopRecord = { steps: 0, requests: 0, usageComplete: true };
    let conversation = this.request;
    for (;;) {
      if (record.steps === this.steps) {
        throw new LoopError(`the model still called tools after ${record.steps} steps`, record);
      }
      let response: Response;
      try {
        response = this.spend === undefined ? call(conversation) : this.spend.call(conversation);
      } catch (e) {
        if (e instanceof BudgetError) {
          throw new LoopError(`step ${record.steps + 1} refused: ${e.message}`, record, e);
        }
        if (e instanceof CallError) {
          addStep(record, failedAttempts(e));
          throw new LoopError(`step ${record.steps} failed: ${e.message}`, record, e);
        }
        throw e;
      }
      addStep(record, response.attempts);
      const calls = response.toolCalls;
      if (calls.length === 0) return { response, conversation, record };
      conversation = conversation.toolCalls(response.content ?? '', [...calls]);
      for (const toolCall of calls) {
        let result: string;
        try {
          result = runTool(toolCall);
        } catch (e) {
          result = `Error: ${e instanceof Error ? e.message : String(e)}`;
        }
        conversation = conversation.toolResult(toolCall.id, result);
      }
    }
  }
}

/** What a failed call's error says it spent, as `attempts`. */
function failedAttempts(e: CallError): Attempts {
  const spent = e.outputTokens;
  return { count: e.totalAttempts ?? 0, outputTokens: spent?.tokens, usageComplete: spent?.complete ?? false };
}

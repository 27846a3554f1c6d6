// The result of a successful call, with its RFC 0248 `attempts`.

import type { ToolCall } from './request.js';

export type FinishReason = 'stop' | 'length' | 'content-filter' | 'tool-call' | 'other';
export type StructuredOutput = 'native' | 'prompt';

export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
}

/** What one call cost, over every provider request it made (RFC 0248 §A). */
export interface Attempts {
  /** Provider requests, retries and fallback included (>= 1). */
  count: number;
  /** Output tokens summed over every attempt that reported usage. */
  outputTokens?: number;
  /** False when an attempt reported no usage: `outputTokens` is a floor. */
  usageComplete: boolean;
  /** The final attempt's mode, for structured calls. */
  structuredOutput?: StructuredOutput;
}

/** The wire shape of a result. */
export interface WireResult {
  content?: string;
  data?: unknown;
  usage?: Usage;
  finishReason?: FinishReason;
  model?: string;
  attempts?: Attempts;
  toolCalls?: ToolCall[];
}

/** A successful call. */
export class Response {
  constructor(private readonly wire: Readonly<WireResult>) {}

  /** The text of a text call. */
  get content(): string | undefined {
    return this.wire.content;
  }

  /** The schema-valid JSON of a structured call. */
  get data(): unknown {
    return this.wire.data;
  }

  /** The answer's tool calls, each checked against its tool's `parameters` (empty for a text answer). */
  get toolCalls(): readonly ToolCall[] {
    return this.wire.toolCalls ?? [];
  }

  /** The final attempt's usage (RFC 0248 §A.4). */
  get usage(): Usage | undefined {
    return this.wire.usage;
  }

  /** The final attempt's finish reason. */
  get finishReason(): FinishReason | undefined {
    return this.wire.finishReason;
  }

  /** The model that answered. */
  get model(): string | undefined {
    return this.wire.model;
  }

  /**
   * Every provider request this call made; undefined when the host does
   * not advertise `callAccounting.attempts`.
   */
  get attempts(): Attempts | undefined {
    return this.wire.attempts;
  }

  /** The result's wire JSON. */
  toJSON(): WireResult {
    return { ...this.wire };
  }
}

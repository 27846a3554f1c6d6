// Building a ctx.callAI request, and the RFC 0248 §B retry policy.

import { RetryError } from './errors.js';

/** The most provider requests one call may ask for. */
export const MAX_ATTEMPTS = 16;

export type Role = 'user' | 'assistant' | 'system' | 'tool';

/** A tool call the model made: its arguments as JSON text. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** A tool the model may call; the host checks every call against `parameters`. */
export interface Tool {
  name: string;
  description?: string;
  /** A JSON Schema of the arguments (an object schema). */
  parameters: unknown;
  strict?: boolean;
}

/** `auto`, `none`, `required`, or the one tool that must be called. */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** An image in a user's message: an `https://` URL or a `data:image/…;base64,…` URL. */
export interface Image {
  url: string;
  /** OpenAI's `detail`, where the provider takes it. */
  detail?: 'auto' | 'low' | 'high';
}

export interface Message {
  role: Role;
  content: string;
  /** An assistant's tool calls. */
  toolCalls?: ToolCall[];
  /** A tool's result: the call it answers. */
  toolCallId?: string;
  /** A user's images, after its text. */
  images?: Image[];
}

/** The wire shape of a retry policy. */
export interface RetryPolicy {
  maxAttempts?: number;
  growMaxTokens?: boolean;
}

/**
 * Narrow what the host does for one call (only honoured when
 * `callAccounting().retryPolicy`). Checked when built: a `maxAttempts`
 * outside 1..16 throws a `RetryError` here, not at the host.
 */
export class Retry {
  private constructor(readonly policy: Readonly<RetryPolicy>) {}

  /** The host's own behaviour (no narrowing). */
  static new(): Retry {
    return new Retry({});
  }

  /** Host retries off: one request, no budget growth. */
  static off(): Retry {
    return new Retry({ maxAttempts: 1, growMaxTokens: false });
  }

  /** At most `n` provider requests (1..16; 1 turns host retries off). */
  maxAttempts(n: number): Retry {
    if (!Number.isInteger(n) || n < 1 || n > MAX_ATTEMPTS) throw new RetryError(n);
    return new Retry({ ...this.policy, maxAttempts: n });
  }

  /** `false`: a truncation retry keeps the request's maxTokens. */
  growMaxTokens(grow: boolean): Retry {
    return new Retry({ ...this.policy, growMaxTokens: grow });
  }

  /** The cap set, if any. */
  get attemptCap(): number | undefined {
    return this.policy.maxAttempts;
  }

  /** Whether truncation retries may grow the budget (`undefined`: the host's default, yes). */
  get growsMaxTokens(): boolean | undefined {
    return this.policy.growMaxTokens;
  }
}

/** The wire shape of a request. */
export interface WireRequest {
  provider?: string;
  model?: string;
  systemPrompt?: string;
  messages: Message[];
  temperature?: number;
  maxTokens?: number;
  stopSequences?: string[];
  responseSchema?: unknown;
  retry?: RetryPolicy;
  tools?: Tool[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
}

/** A ctx.callAI request, built step by step; each step returns a new request. */
export class Request {
  private constructor(private readonly wire: Readonly<WireRequest>) {}

  /** An empty request; add at least one message. */
  static new(): Request {
    return new Request({ messages: [] });
  }

  private with(change: Partial<WireRequest>): Request {
    return new Request({ ...this.wire, ...change });
  }

  /** The provider (`mock`, `openai`, a name the host configured). */
  provider(name: string): Request {
    return this.with({ provider: name });
  }

  /** The model id; the provider's default otherwise. */
  model(name: string): Request {
    return this.with({ model: name });
  }

  /** The system instruction. */
  system(prompt: string): Request {
    return this.with({ systemPrompt: prompt });
  }

  /** Appends a message. */
  message(role: Role, content: string): Request {
    return this.with({ messages: [...this.wire.messages, { role, content }] });
  }

  /** Appends a user message. */
  user(content: string): Request {
    return this.message('user', content);
  }

  /**
   * Appends a user message with `images` after its text: for a model that
   * sees, on a provider whose section does not say `vision = false`.
   */
  userWithImages(content: string, images: Image[]): Request {
    const message: Message = { role: 'user', content, images: images.map((i) => ({ ...i })) };
    return this.with({ messages: [...this.wire.messages, message] });
  }

  /** Appends an assistant message. */
  assistant(content: string): Request {
    return this.message('assistant', content);
  }

  /** Sampling temperature, 0..2. */
  temperature(t: number): Request {
    return this.with({ temperature: t });
  }

  /** The output budget. */
  maxTokens(n: number): Request {
    return this.with({ maxTokens: n });
  }

  /** Adds a stop sequence. */
  stop(sequence: string): Request {
    return this.with({ stopSequences: [...(this.wire.stopSequences ?? []), sequence] });
  }

  /** A JSON Schema: the call becomes structured and the result carries `data`. */
  schema(schema: unknown): Request {
    return this.with({ responseSchema: schema });
  }

  /** The RFC 0248 §B retry policy. */
  retry(retry: Retry): Request {
    return this.with({ retry: { ...retry.policy } });
  }

  /** Offers the model a tool; its calls come back checked (`Response.toolCalls`). */
  tool(tool: Tool): Request {
    return this.with({ tools: [...(this.wire.tools ?? []), tool] });
  }

  /** Whether and which tool the model must call (`auto` otherwise); a forced call is native structured output. */
  toolChoice(choice: ToolChoice): Request {
    return this.with({ toolChoice: choice });
  }

  /** `false`: at most one tool call per answer. */
  parallelToolCalls(allowed: boolean): Request {
    return this.with({ parallelToolCalls: allowed });
  }

  /** Appends the assistant's turn that called `calls` (with its text, if any). */
  toolCalls(content: string, calls: ToolCall[]): Request {
    const message: Message = { role: 'assistant', content, toolCalls: calls.map((c) => ({ ...c })) };
    return this.with({ messages: [...this.wire.messages, message] });
  }

  /** Appends a tool's result, answering the call `callId`. */
  toolResult(callId: string, content: string): Request {
    const message: Message = { role: 'tool', content, toolCallId: callId };
    return this.with({ messages: [...this.wire.messages, message] });
  }

  /** The output budget set, if any. */
  get requestedMaxTokens(): number | undefined {
    return this.wire.maxTokens;
  }

  /** The retry policy set, if any. */
  get requestedRetry(): Retry | undefined {
    const p = this.wire.retry;
    if (p === undefined) return undefined;
    let r = Retry.new();
    if (p.maxAttempts !== undefined) r = r.maxAttempts(p.maxAttempts);
    if (p.growMaxTokens !== undefined) r = r.growMaxTokens(p.growMaxTokens);
    return r;
  }

  /** The spec's wire JSON (camelCase), as `callJson` takes it. */
  toJSON(): WireRequest {
    return { ...this.wire };
  }
}

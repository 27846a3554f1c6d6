// Errors a pack sees: a failed call, a retry policy refused when built, a
// budget that would be exceeded.

/** The error codes of the spec, plus the host's own (wire spelling). */
export type ErrorCode =
  | 'validation_error'
  | 'policy_denied'
  | 'envelope_invalid'
  | 'envelope_truncation_unrecoverable'
  | 'envelope_refusal'
  | 'provider_unavailable'
  | 'provider_rejected'
  | 'limit_exceeded';

/**
 * A failed ctx.callAI call: `{code, message, details?}`. Its `message` (as
 * an `Error`) is `code: text`; `text` is the wire message alone.
 */
export class CallError extends Error {
  readonly code: ErrorCode;
  readonly text: string;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, text: string, details?: Record<string, unknown>) {
    super(`${code}: ${text}`);
    this.name = 'CallError';
    this.code = code;
    this.text = text;
    this.details = details;
  }

  /** `details.field` of a validation error. */
  get field(): string | undefined {
    const f = this.details?.field;
    return typeof f === 'string' ? f : undefined;
  }

  /** Provider requests the host made before giving up (`details.totalAttempts`). */
  get totalAttempts(): number | undefined {
    const n = this.details?.totalAttempts;
    return typeof n === 'number' ? n : undefined;
  }

  /**
   * Output tokens reported over the failed call's requests and whether the
   * sum is complete; undefined when the host gave neither.
   */
  get outputTokens(): { tokens: number; complete: boolean } | undefined {
    const complete = this.details?.usageComplete;
    if (typeof complete !== 'boolean') return undefined;
    const tokens = this.details?.outputTokens;
    return { tokens: typeof tokens === 'number' ? tokens : 0, complete };
  }

  /** The wire JSON `{code, message, details?}`. */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { code: this.code, message: this.text };
    if (this.details !== undefined) out.details = this.details;
    return out;
  }
}

/** A `maxAttempts` outside 1..16, refused when the policy is built. */
export class RetryError extends Error {
  readonly maxAttempts: number;

  constructor(maxAttempts: number) {
    super(`retry.maxAttempts must be 1..16, got ${maxAttempts}`);
    this.name = 'RetryError';
    this.maxAttempts = maxAttempts;
  }
}

/** A call the budget refused before sending anything. */
export class BudgetError extends Error {
  readonly limit: 'maxRequests' | 'maxOutputTokens';
  readonly allowed: number;
  readonly spent: number;
  readonly needed: number;

  constructor(limit: 'maxRequests' | 'maxOutputTokens', allowed: number, spent: number, needed: number) {
    super(`budget ${limit} = ${allowed} would be exceeded: ${spent} spent, the next call needs ${needed} more`);
    this.name = 'BudgetError';
    this.limit = limit;
    this.allowed = allowed;
    this.spent = spent;
    this.needed = needed;
  }
}

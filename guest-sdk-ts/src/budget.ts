// A per-node budget charged by what calls really cost: provider requests
// from `attempts.count`, output tokens from `attempts.outputTokens`
// (RFC 0248 §A), not by the number of calls. The Rust SDK's `Budget`,
// rule for rule.

import { call, callAccounting } from './call.js';
import { BudgetError, CallError } from './errors.js';
import { MAX_ATTEMPTS, Retry, type Request } from './request.js';
import type { Attempts, Response } from './response.js';

/** What a request without maxTokens is taken to cost: the host default. */
export const DEFAULT_MAX_TOKENS = 4000;

/** What a node has spent so far. */
export interface Spent {
  /** Calls made: what a pack that counts calls believes it spent. */
  calls: number;
  /** Provider requests those calls made. */
  requests: number;
  /** Output tokens reported over those requests. */
  outputTokens: number;
  /** True when some request reported no usage: `outputTokens` is a floor. */
  outputTokensIsFloor: boolean;
}

export class Budget {
  private maxRequestsLimit: number | undefined;
  private maxOutputTokensLimit: number | undefined;
  private defaultMaxTokensValue = DEFAULT_MAX_TOKENS;
  private readonly spentSoFar: Spent = { calls: 0, requests: 0, outputTokens: 0, outputTokensIsFloor: false };

  /** At most `n` provider requests for the node. */
  maxRequests(n: number): this {
    this.maxRequestsLimit = n;
    return this;
  }

  /** At most `n` output tokens for the node. */
  maxOutputTokens(n: number): this {
    this.maxOutputTokensLimit = n;
    return this;
  }

  /** What a request without maxTokens is taken to cost (default 4000). */
  defaultMaxTokens(n: number): this {
    this.defaultMaxTokensValue = n;
    return this;
  }

  /** What has been spent. */
  spent(): Spent {
    return { ...this.spentSoFar };
  }

  /** Provider requests left, if limited. */
  remainingRequests(): number | undefined {
    return this.maxRequestsLimit === undefined
      ? undefined
      : Math.max(0, this.maxRequestsLimit - this.spentSoFar.requests);
  }

  /** Throws a `BudgetError` unless one more request and its maxTokens fit. */
  admit(request: Request): void {
    const s = this.spentSoFar;
    if (this.maxRequestsLimit !== undefined && s.requests >= this.maxRequestsLimit) {
      throw new BudgetError('maxRequests', this.maxRequestsLimit, s.requests, 1);
    }
    if (this.maxOutputTokensLimit !== undefined) {
      const needed = request.requestedMaxTokens ?? this.defaultMaxTokensValue;
      if (s.outputTokens + needed > this.maxOutputTokensLimit) {
        throw new BudgetError('maxOutputTokens', this.maxOutputTokensLimit, s.outputTokens, needed);
      }
    }
  }

  /** Charges one call by its attempts (undefined: one request, tokens a floor). */
  charge(attempts: Attempts | undefined): void {
    const s = this.spentSoFar;
    s.calls += 1;
    if (attempts === undefined) {
      s.requests += 1;
      s.outputTokensIsFloor = true;
      return;
    }
    s.requests += attempts.count;
    s.outputTokens += attempts.outputTokens ?? 0;
    s.outputTokensIsFloor ||= !attempts.usageComplete;
  }

  /** Charges a failed call: what the host reports it spent. */
  chargeError(error: CallError): void {
    const s = this.spentSoFar;
    s.calls += 1;
    // A refusal before any request (validation, policy) costs nothing.
    const requests = error.totalAttempts ?? 0;
    s.requests += requests;
    const tokens = error.outputTokens;
    if (tokens === undefined) {
      s.outputTokensIsFloor ||= requests > 0;
    } else {
      s.outputTokens += tokens.tokens;
      s.outputTokensIsFloor ||= !tokens.complete;
    }
  }

  /**
   * Admits, sends and charges one call. When the host honours `retry`, the
   * call's maxAttempts is narrowed to the requests left. Throws a
   * `BudgetError` (nothing sent) or a `CallError` (charged).
   */
  call(request: Request): Response {
    this.admit(request);
    let narrowed = request;
    const left = this.remainingRequests();
    if (left !== undefined && callAccounting().retryPolicy) {
      const retry = request.requestedRetry ?? Retry.new();
      const cap = Math.min(retry.attemptCap ?? left, left);
      narrowed = request.retry(retry.maxAttempts(Math.min(Math.max(cap, 1), MAX_ATTEMPTS)));
    }
    try {
      const response = call(narrowed);
      this.charge(response.attempts);
      return response;
    } catch (e) {
      if (e instanceof CallError) this.chargeError(e);
      throw e;
    }
  }
}

// ctx.callAI from inside the sandbox.

import { callAccounting as hostFlags, callAiJson } from 'openwop:callai/ai@0.1.0';
import { CallError, type ErrorCode } from './errors.js';
import type { Request } from './request.js';
import { Response, type WireResult } from './response.js';

/** What the host advertises under `aiProviders.callAccounting` (RFC 0248 §C). */
export interface CallAccounting {
  /** Results carry `attempts`. */
  attempts: boolean;
  /** The host honours `retry`. */
  retryPolicy: boolean;
}

/** What the host advertises: check before relying on `attempts` or `retry`. */
export function callAccounting(): CallAccounting {
  const flags = hostFlags();
  return { attempts: flags.attempts, retryPolicy: flags.retryPolicy };
}

/** The WIT's kebab-case error code in the wire's snake_case. */
function wireCode(code: string): ErrorCode {
  return code.replaceAll('-', '_') as ErrorCode;
}

/**
 * One model completion in the spec's wire JSON: the request as written
 * (malformed input reaches the host and is refused there), the result's
 * wire JSON back. Throws a `CallError`.
 */
export function callJson(request: string): string {
  try {
    return callAiJson(request);
  } catch (e) {
    const payload = (e as { payload?: { code: string; message: string; details?: string } }).payload;
    if (payload === undefined) throw e;
    const details = payload.details === undefined ? undefined : JSON.parse(payload.details);
    throw new CallError(wireCode(payload.code), payload.message, details);
  }
}

/** One model completion. Throws a `CallError` when the call fails. */
export function call(request: Request): Response {
  return new Response(JSON.parse(callJson(JSON.stringify(request))) as WireResult);
}

/**
 * One structured call whose data is checked by `decode` (which throws when
 * the data is not what the pack takes) and returned with the response.
 */
export function callAs<T>(request: Request, decode: (data: unknown) => T): { data: T; response: Response } {
  const response = call(request);
  return { data: decode(response.data), response };
}

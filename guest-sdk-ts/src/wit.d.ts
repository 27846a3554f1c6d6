// The `openwop:callai` imports as componentize-js exposes them: records as
// objects with camelCase fields, enums as their kebab-case strings, and a
// `result<T, E>` as a T returned or an error thrown whose `payload` is the E.
// Kept small, and checked against wit/callai.wit by a test
// (tests/all/sdk_declarations.rs).

declare module 'openwop:callai/types@0.1.0' {
  export type Role = 'user' | 'assistant' | 'system';
  export type FinishReason = 'stop' | 'length' | 'content-filter' | 'tool-call' | 'other';
  export type StructuredOutput = 'native' | 'prompt';
  export type ErrorCode =
    | 'validation-error'
    | 'policy-denied'
    | 'envelope-invalid'
    | 'envelope-truncation-unrecoverable'
    | 'envelope-refusal'
    | 'provider-unavailable'
    | 'provider-rejected'
    | 'limit-exceeded';
  export interface CallError {
    code: ErrorCode;
    message: string;
    details?: string;
  }
  export interface AccountingFlags {
    attempts: boolean;
    retryPolicy: boolean;
  }
}

declare module 'openwop:callai/ai@0.1.0' {
  import type { AccountingFlags } from 'openwop:callai/types@0.1.0';
  /** One model completion in the spec's wire JSON; throws `{payload: CallError}`. */
  export function callAiJson(request: string): string;
  /** The host's callAccounting flags. */
  export function callAccounting(): AccountingFlags;
}

declare module 'openwop:callai/log@0.1.0' {
  export type Level = 'debug' | 'info' | 'warn' | 'error';
  export function log(level: Level, message: string): void;
}

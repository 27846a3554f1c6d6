// Write callAI pack nodes in TypeScript: a request builder, results with
// attempt accounting (RFC 0248), a per-node budget, tool calls and a tool
// loop, and `defineNode`.
// Built into a WebAssembly component with `callai-pack build` (bin/build.mjs).

export { Budget, DEFAULT_MAX_TOKENS, type Spent } from './budget.js';
export { call, callAccounting, callAs, callJson, type CallAccounting } from './call.js';
export { BudgetError, CallError, type ErrorCode, RetryError } from './errors.js';
export { defineNode, defineRawNode, log, NodeError } from './node.js';
export {
  type Image,
  MAX_ATTEMPTS,
  type Message,
  Request,
  Retry,
  type RetryPolicy,
  type Role,
  type Tool,
  type ToolCall,
  type ToolChoice,
  type WireRequest,
} from './request.js';
export { addStep, argumentsAs, type LoopAnswer, LoopError, type LoopRecord, ToolLoop } from './tools.js';
export { type Attempts, type FinishReason, Response, type StructuredOutput, type Usage, type WireResult } from './response.js';

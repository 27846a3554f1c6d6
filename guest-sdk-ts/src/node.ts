// A pack node, and its log.

import { log as hostLog } from 'openwop:callai/log@0.1.0';

/** Diagnostics that the host collects with the run's events (`pack.log`). */
export const log = {
  debug: (message: string): void => hostLog('debug', message),
  info: (message: string): void => hostLog('info', message),
  warn: (message: string): void => hostLog('warn', message),
  error: (message: string): void => hostLog('error', message),
};

/** Why a node failed; the host reports its message as the run's error. */
export class NodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NodeError';
  }
}

/**
 * Defines the node: `export const run = defineNode((input: Input) => output)`.
 * The host's JSON input is parsed and handed to `node`; what it returns is
 * serialised back. What it throws fails the run with the error's message.
 */
export function defineNode<I, O>(node: (input: I) => O): (input: string) => string {
  return (text: string): string => {
    let input: I;
    try {
      input = JSON.parse(text) as I;
    } catch (e) {
      throw `the node's input is not what it takes: ${(e as Error).message}`;
    }
    try {
      return JSON.stringify(node(input));
    } catch (e) {
      throw e instanceof Error ? e.message : String(e);
    }
  };
}

/** Defines a node that takes and returns JSON text as it is. */
export function defineRawNode(node: (input: string) => string): (input: string) => string {
  return (text: string): string => {
    try {
      return node(text);
    } catch (e) {
      throw e instanceof Error ? e.message : String(e);
    }
  };
}

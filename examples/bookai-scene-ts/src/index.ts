// `bookai.scene.draft` in TypeScript: the Book AI pack of
// examples/bookai-scene, decision for decision, so that on the same scripts
// it shows the same estimate and spends the same.

import {
  Budget,
  BudgetError,
  CallError,
  callAccounting,
  defineNode,
  log,
  Request,
  type Response,
  Retry,
  type Spent,
} from '@openwop/callai-sdk';
import { schema, validate } from './scene.js';

interface Input {
  premise: string;
  maxCalls?: number;
  maxOutputTokens?: number;
  maxTokens?: number;
  hostRetries?: boolean;
}

const KEYS = ['premise', 'maxCalls', 'maxOutputTokens', 'maxTokens', 'hostRetries'];

class Settings {
  readonly premise: string;
  readonly maxCalls: number;
  readonly maxOutputTokens: number;
  readonly maxTokens: number;
  readonly ownLoop: boolean;
  readonly retryPolicy: boolean;

  constructor(input: Input) {
    const unknown = Object.keys(input).find((k) => !KEYS.includes(k));
    if (unknown !== undefined) throw new Error(`unknown field \`${unknown}\` in the input`);
    if (typeof input.premise !== 'string') throw new Error('input.premise must be a string');
    const whole = (name: keyof Input, fallback: number): number => {
      const v = input[name] ?? fallback;
      if (!Number.isInteger(v) || (v as number) < 0) throw new Error(`input.${name} must be an integer`);
      return v as number;
    };
    this.premise = input.premise;
    this.maxCalls = whole('maxCalls', 4);
    this.maxOutputTokens = whole('maxOutputTokens', 12000);
    this.maxTokens = whole('maxTokens', 1500);
    const flags = callAccounting();
    // Host retries can only be turned off where the host honours `retry`.
    this.ownLoop = !(input.hostRetries ?? false) && flags.retryPolicy;
    this.retryPolicy = flags.retryPolicy;
  }

  /** What the author is shown before the run: the worst case of the plan. */
  estimate(): Record<string, unknown> {
    const m = this.maxTokens;
    if (this.ownLoop) {
      return { calls: 3, requests: 3, outputTokens: m + 2 * m + m,
               basis: 'host retries off: each call is exactly one request' };
    }
    if (this.retryPolicy) {
      return { calls: 2, requests: this.maxCalls, outputTokens: null,
               basis: 'host retries on, each call capped by retry.maxAttempts at the requests left; budgets may grow' };
    }
    return { calls: 2, requests: null, outputTokens: null,
             basis: 'the host does not advertise retryPolicy: it may retry every call; spend is counted from attempts' };
  }

  request(maxTokens: number): Request {
    const request = Request.new()
      .system('You draft one scene of a novel. Reply with JSON only: title, scene, characters (names), mood (calm, tense, joyful or melancholy).')
      .user(`Premise: ${this.premise}`)
      .maxTokens(maxTokens)
      .schema(schema());
    return this.ownLoop ? request.retry(Retry.off()) : request;
  }
}

function spentJson(s: Spent): Record<string, unknown> {
  return { calls: s.calls, requests: s.requests, outputTokens: s.outputTokens, outputTokensIsFloor: s.outputTokensIsFloor };
}

/** Why the node stopped, with what it estimated and spent. */
function failure(settings: Settings, budget: Budget, reason: string): Error {
  return new Error(JSON.stringify({ error: reason, estimate: settings.estimate(), spent: spentJson(budget.spent()) }));
}

/** A call through the budget: the response, or what stopped it. */
function attempt(budget: Budget, request: Request): Response | BudgetError | CallError {
  try {
    return budget.call(request);
  } catch (e) {
    if (e instanceof BudgetError || e instanceof CallError) return e;
    throw e;
  }
}

export const run = defineNode((input: Input) => {
  const settings = new Settings(input);
  const budget = new Budget().maxRequests(settings.maxCalls).maxOutputTokens(settings.maxOutputTokens);
  log.info(`estimate before the run: ${JSON.stringify(settings.estimate())}`);

  // The draft; in the pack's own loop, a truncated draft is asked again once
  // with a doubled budget.
  let draft = attempt(budget, settings.request(settings.maxTokens));
  if (settings.ownLoop && draft instanceof CallError && draft.code === 'envelope_truncation_unrecoverable') {
    log.info('the draft was truncated: asking again with twice the budget');
    draft = attempt(budget, settings.request(settings.maxTokens * 2));
  }
  // Its own closed-world check; one repair, fed with the error.
  let complaint: [string, string] | undefined;
  if (draft instanceof CallError && draft.code === 'envelope_invalid') {
    complaint = [draft.text, ''];
  } else if (draft instanceof Error) {
    throw failure(settings, budget, draft.message);
  } else if (draft.data === undefined) {
    complaint = ['the reply carried no data', ''];
  } else {
    const why = validate(draft.data);
    complaint = why === undefined ? undefined : [why, JSON.stringify(draft.data)];
  }
  let scene = draft instanceof Error ? undefined : draft.data;
  if (complaint !== undefined) {
    const [why, previous] = complaint;
    log.warn(`the draft failed validation: ${why}`);
    let repair = settings.request(settings.maxTokens);
    if (previous !== '') repair = repair.assistant(previous);
    repair = repair.user(`That scene is not valid: ${why}. Reply with a corrected scene, JSON only.`);
    const repaired = attempt(budget, repair);
    if (repaired instanceof Error) throw failure(settings, budget, repaired.message);
    scene = repaired.data ?? null;
    const still = validate(scene);
    if (still !== undefined) throw failure(settings, budget, `the repair failed validation too: ${still}`);
  }
  return {
    scene,
    hostRetries: settings.ownLoop ? 'off' : 'on',
    estimate: settings.estimate(),
    spent: spentJson(budget.spent()),
  };
});

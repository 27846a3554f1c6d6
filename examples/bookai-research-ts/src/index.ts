// `bookai.research.brief` in TypeScript: the research agent of
// examples/bookai-research, decision for decision, so that on the same
// scripts it runs the same tools and spends the same.

import {
  argumentsAs,
  Budget,
  defineNode,
  LoopError,
  Request,
  type Spent,
  type ToolCall,
  ToolLoop,
} from '@openwop/callai-sdk';
import { read, search } from './notes.js';

interface Input {
  question: string;
  maxRequests?: number;
  maxSteps?: number;
}

const SEARCH = {
  name: 'search_notes',
  description: "Search the book's research notes; returns matching note ids and titles.",
  parameters: {
    type: 'object',
    required: ['query'],
    additionalProperties: false,
    properties: { query: { type: 'string', minLength: 1 } },
  },
};

const READ = {
  name: 'read_note',
  description: 'Read one research note in full, by its id.',
  parameters: {
    type: 'object',
    required: ['id'],
    additionalProperties: false,
    properties: { id: { type: 'string', pattern: '^n[0-9]+$' } },
  },
};

/** Runs one tool call: its result; what it throws goes back as an error. */
function runTool(toolCall: ToolCall): string {
  switch (toolCall.name) {
    case 'search_notes':
      return JSON.stringify(search(argumentsAs<{ query: string }>(toolCall).query));
    case 'read_note': {
      const { id } = argumentsAs<{ id: string }>(toolCall);
      const note = read(id);
      if (note === undefined) throw new Error(`no note ${id}`);
      return note;
    }
    default:
      throw new Error(`no tool ${toolCall.name}`);
  }
}

function spentJson(s: Spent): Record<string, unknown> {
  return {
    calls: s.calls,
    requests: s.requests,
    outputTokens: s.outputTokens,
    outputTokensIsFloor: s.outputTokensIsFloor,
  };
}

export const run = defineNode((input: Input) => {
  if (typeof input.question !== 'string') throw new Error('input.question must be a string');
  const budget = new Budget().maxRequests(input.maxRequests ?? 6);
  const request = Request.new()
    .system(
      'You research for a novelist. Find the relevant notes with search_notes, ' +
        'read them with read_note, then answer in at most three sentences.',
    )
    .user(input.question)
    .maxTokens(600)
    .tool(SEARCH)
    .tool(READ);
  const toolsRun: string[] = [];
  try {
    const answer = new ToolLoop(request)
      .maxSteps(input.maxSteps ?? 5)
      .budget(budget)
      .run((toolCall) => {
        toolsRun.push(toolCall.name);
        return runTool(toolCall);
      });
    return {
      brief: answer.response.content ?? '',
      toolsRun,
      loop: answer.record,
      spent: spentJson(budget.spent()),
    };
  } catch (e) {
    if (e instanceof LoopError && !(e.cause instanceof Error && e.cause.name === 'CallError')) {
      const r = e.record;
      throw new Error(
        `${e.message} (after ${r.steps} steps, ${r.requests} requests; budget spent ${JSON.stringify(spentJson(budget.spent()))})`,
      );
    }
    throw e instanceof LoopError && e.cause !== undefined ? e.cause : e;
  }
});

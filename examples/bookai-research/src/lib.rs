//! `bookai.research.brief`: a Book AI research step, as an agent. The model
//! answers a novelist's question from the book's research notes through
//! two tools, `search_notes` and `read_note`; the pack runs them and sends
//! their results back until the model answers in text.
//!
//! The loop is the pack's ([`ToolLoop`]); the host validates each tool call
//! against its schema (a malformed call is retried there, and counted) and
//! reports each step's `attempts`. The node's budget (`maxRequests`)
//! charges every step by the provider requests it really made, so host
//! retries inside a step cannot overrun it.
//!
//! Input: `{"question", "maxRequests"?: 6, "maxSteps"?: 5}`.
//! Output: `{"brief", "toolsRun", "loop": {steps, requests, outputTokens,
//! usageComplete}, "spent"}`.

mod notes;

use callai_sdk::{
    Budget, LoopError, Node, NodeError, Request, Tool, ToolCall, ToolLoop, arguments_as,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

struct BookAiResearch;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Input {
    question: String,
    #[serde(default = "default_max_requests")]
    max_requests: u32,
    #[serde(default = "default_max_steps")]
    max_steps: u32,
}

fn default_max_requests() -> u32 {
    6
}

fn default_max_steps() -> u32 {
    5
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    brief: String,
    tools_run: Vec<String>,
    #[serde(rename = "loop")]
    record: callai_sdk::LoopRecord,
    spent: Value,
}

fn tools() -> [Tool; 2] {
    [
        Tool::new(
            "search_notes",
            json!({"type": "object", "required": ["query"], "additionalProperties": false,
                   "properties": {"query": {"type": "string", "minLength": 1}}}),
        )
        .describe("Search the book's research notes; returns matching note ids and titles."),
        Tool::new(
            "read_note",
            json!({"type": "object", "required": ["id"], "additionalProperties": false,
                   "properties": {"id": {"type": "string", "pattern": "^n[0-9]+$"}}}),
        )
        .describe("Read one research note in full, by its id."),
    ]
}

#[derive(Deserialize)]
struct Search {
    query: String,
}

#[derive(Deserialize)]
struct Read {
    id: String,
}

/// Runs one tool call: its result, or an error the model can recover from.
fn run_tool(call: &ToolCall) -> Result<String, String> {
    match call.name.as_str() {
        "search_notes" => {
            let args: Search = arguments_as(call).map_err(|e| e.to_string())?;
            Ok(notes::search(&args.query).to_string())
        }
        "read_note" => {
            let args: Read = arguments_as(call).map_err(|e| e.to_string())?;
            notes::read(&args.id).ok_or_else(|| format!("no note {}", args.id))
        }
        other => Err(format!("no tool {other}")),
    }
}

fn spent(budget: &Budget) -> Value {
    let s = budget.spent();
    json!({"calls": s.calls, "requests": s.requests, "outputTokens": s.output_tokens,
           "outputTokensIsFloor": s.output_tokens_is_floor})
}

impl Node for BookAiResearch {
    type Input = Input;
    type Output = Output;

    fn run(input: Input) -> Result<Output, NodeError> {
        let mut budget = Budget::new().max_requests(input.max_requests);
        let [search, read] = tools();
        let request = Request::new()
            .system(
                "You research for a novelist. Find the relevant notes with search_notes, \
                 read them with read_note, then answer in at most three sentences.",
            )
            .user(input.question)
            .max_tokens(600)
            .tool(search)
            .tool(read);
        let mut tools_run = Vec::new();
        let answer = ToolLoop::new(request)
            .max_steps(input.max_steps)
            .budget(&mut budget)
            .run(|call| {
                tools_run.push(call.name.clone());
                run_tool(call)
            });
        match answer {
            Ok(answer) => Ok(Output {
                brief: answer.response.content().unwrap_or_default().to_owned(),
                tools_run,
                record: answer.record,
                spent: spent(&budget),
            }),
            Err(e @ (LoopError::Budget(..) | LoopError::TooManySteps(_))) => {
                let r = e.record();
                Err(NodeError::new(format!(
                    "{e} (after {} steps, {} requests; budget spent {})",
                    r.steps,
                    r.requests,
                    spent(&budget)
                )))
            }
            Err(LoopError::Call(e, _)) => Err(e.into()),
        }
    }
}

callai_sdk::export_node!(BookAiResearch);

//! `examples.summarize`: a first small pack. It asks for a structured summary
//! of its input text, and reports what the call really cost.
//!
//! Input: `{"text": "..."}`. Output: `{"summary", "keyPoints", "spent": {"requests", "outputTokens", "usageComplete"} | null}`.

use callai_sdk::{Node, NodeError, Request, call_as, log};
use serde::{Deserialize, Serialize};
use serde_json::json;

struct Summarize;

#[derive(Deserialize)]
struct Input {
    text: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    summary: String,
    key_points: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spent {
    requests: u32,
    output_tokens: Option<u64>,
    usage_complete: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    #[serde(flatten)]
    summary: Summary,
    spent: Option<Spent>,
}

impl Node for Summarize {
    type Input = Input;
    type Output = Output;

    fn run(input: Input) -> Result<Output, NodeError> {
        let schema = json!({
            "type": "object",
            "required": ["summary", "keyPoints"],
            "additionalProperties": false,
            "properties": {
                "summary": {"type": "string", "minLength": 1},
                "keyPoints": {"type": "array", "items": {"type": "string"}, "maxItems": 5}
            }
        });
        let request = Request::new()
            .system("Summarise the user's text in one sentence and up to five key points.")
            .user(input.text)
            .max_tokens(400)
            .schema(schema);
        let answer = call_as::<Summary>(&request)?;
        let spent = answer.response.attempts().map(|a| Spent {
            requests: a.count,
            output_tokens: a.output_tokens,
            usage_complete: a.usage_complete,
        });
        if spent.is_none() {
            log::warn("host does not advertise callAccounting.attempts; spend unknown");
        }
        Ok(Output {
            summary: answer.data,
            spent,
        })
    }
}

callai_sdk::export_node!(Summarize);

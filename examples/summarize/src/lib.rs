//! `examples.summarize`: a first small pack. It asks for a structured summary
//! of its input text, and reports what the call really cost.
//!
//! Input: `{"text": "..."}`. Output: `{"summary", "keyPoints", "spent": {"requests", "outputTokens", "usageComplete"}}`.

use callai_sdk::{Node, NodeError, Request, call, log};
use serde::Deserialize;
use serde_json::json;

struct Summarize;

#[derive(Deserialize)]
struct Input {
    text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    summary: String,
    key_points: Vec<String>,
}

impl Node for Summarize {
    fn run(input: &str) -> Result<String, NodeError> {
        let input: Input = serde_json::from_str(input)
            .map_err(|e| NodeError::new(format!("input must be {{\"text\": string}}: {e}")))?;
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
        let response = call(&request)?;
        let summary: Summary = response.data_as()?;
        let spent = match response.attempts() {
            Some(a) => json!({"requests": a.count, "outputTokens": a.output_tokens,
                              "usageComplete": a.usage_complete}),
            None => {
                log::warn("host does not advertise callAccounting.attempts; spend unknown");
                json!(null)
            }
        };
        Ok(
            json!({"summary": summary.summary, "keyPoints": summary.key_points, "spent": spent})
                .to_string(),
        )
    }
}

callai_sdk::export_node!(Summarize);

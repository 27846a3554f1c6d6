//! A pack that uses the typed entry: its input names the request fields it
//! sets, so tests can send through `call-ai` what `call-ai-json` also takes.
//!
//! Input: `{"prompt", "maxTokens"?, "schema"?, "maxAttempts"?, "growMaxTokens"?}`.
//! Output: the result's wire JSON, or `{"error": ...}`.

use callai_sdk::{Node, NodeError, Request, Retry, call, call_accounting};
use serde_json::{Value, json};

struct TypedCall;

impl Node for TypedCall {
    fn run(input: &str) -> Result<String, NodeError> {
        let input: Value = serde_json::from_str(input)?;
        let mut request = Request::new().user(input["prompt"].as_str().unwrap_or("hi"));
        if let Some(n) = input["maxTokens"].as_u64() {
            request = request.max_tokens(n as u32);
        }
        if input.get("schema").is_some() {
            request = request.schema(input["schema"].clone());
        }
        let mut retry = None;
        if let Some(n) = input["maxAttempts"].as_u64() {
            retry = Some(retry.unwrap_or_else(Retry::new).max_attempts(n as u32));
        }
        if let Some(g) = input["growMaxTokens"].as_bool() {
            retry = Some(retry.unwrap_or_else(Retry::new).grow_max_tokens(g));
        }
        if let Some(r) = retry {
            request = request.retry(r);
        }
        let flags = call_accounting();
        let output = match call(&request) {
            Ok(response) => json!({"result": response.to_json(),
                "flags": {"attempts": flags.attempts, "retryPolicy": flags.retry_policy}}),
            Err(e) => json!({"error": e.to_json()}),
        };
        Ok(output.to_string())
    }
}

callai_sdk::export_node!(TypedCall);

fn main() {}

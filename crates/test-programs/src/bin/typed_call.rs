//! A pack that uses the typed entry: its input names the request fields it
//! sets, so tests can send through `call-ai` what `call-ai-json` also takes.
//! It builds the wire request itself, so that out-of-range values the SDK's
//! `Retry` would refuse still reach the host.
//!
//! Input: `{"prompt", "maxTokens"?, "schema"?, "maxAttempts"?, "growMaxTokens"?}`.
//! Output: `{"result", "flags"}`, or `{"error": ...}`.

use callai_sdk::{Node, NodeError, Request, call, call_accounting};
use callai_wire::{CallRequest, Message, RetryPolicy};
use serde::Deserialize;
use serde_json::{Value, json};

struct TypedCall;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    prompt: String,
    max_tokens: Option<u32>,
    schema: Option<Value>,
    max_attempts: Option<u32>,
    grow_max_tokens: Option<bool>,
}

impl Node for TypedCall {
    type Input = Input;
    type Output = Value;

    fn run(input: Input) -> Result<Value, NodeError> {
        let retry = (input.max_attempts.is_some() || input.grow_max_tokens.is_some()).then_some(
            RetryPolicy {
                max_attempts: input.max_attempts,
                grow_max_tokens: input.grow_max_tokens,
            },
        );
        let request = Request::from(CallRequest {
            messages: vec![Message::user(input.prompt)],
            max_tokens: input.max_tokens,
            response_schema: input.schema,
            retry,
            ..CallRequest::default()
        });
        let flags = call_accounting();
        Ok(match call(&request) {
            Ok(response) => json!({"result": response.to_json(),
                "flags": {"attempts": flags.attempts, "retryPolicy": flags.retry_policy}}),
            Err(e) => json!({"error": e.to_json()}),
        })
    }
}

callai_sdk::export_node!(TypedCall);

fn main() {}

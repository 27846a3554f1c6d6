//! `conformance.callai.echo-attempts`: the conformance node of RFC 0248.
//!
//! Input: a ctx.callAI request in wire JSON, passed verbatim to the host's
//! JSON entry (so a malformed `retry` reaches the host and is refused there).
//! Output on success: `{"attempts", "usage", "finishReason", "content" | "data"}`,
//! each field absent when the host left it out. On a failed call the node
//! still succeeds, with `{"error": {"code", "message", "details"}}`.

use callai_sdk::{NodeError, RawNode, call_json};
use serde_json::{Map, Value, json};

struct EchoAttempts;

/// The result fields the conformance suite reads.
const ECHOED: [&str; 5] = ["attempts", "usage", "finishReason", "content", "data"];

impl RawNode for EchoAttempts {
    fn run(input: &str) -> Result<String, NodeError> {
        let output = match call_json(input) {
            Ok(result) => {
                let result: Map<String, Value> = serde_json::from_str(&result)?;
                let echoed: Map<String, Value> = result
                    .into_iter()
                    .filter(|(k, _)| ECHOED.contains(&k.as_str()))
                    .collect();
                Value::Object(echoed)
            }
            Err(error) => json!({ "error": error.to_json() }),
        };
        Ok(output.to_string())
    }
}

callai_sdk::export_node!(raw EchoAttempts);

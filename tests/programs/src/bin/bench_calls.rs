//! A pack for the benchmarks: `{"calls": N, "mode": "noop" | "text" | "structured"}`
//! makes N imported calls of that kind. `noop` calls `call-accounting`, an
//! import that does nothing but answer: the floor a callAI round trip is
//! measured against.

use callai_sdk::{Node, NodeError, Request, call, call_accounting};
use serde_json::{Value, json};

struct BenchCalls;

impl Node for BenchCalls {
    fn run(input: &str) -> Result<String, NodeError> {
        let v: Value = serde_json::from_str(input)?;
        let calls = v["calls"].as_u64().unwrap_or(0);
        let text = Request::new().user("hi").max_tokens(16);
        let structured = text
            .clone()
            .schema(json!({"type": "object", "required": ["a"]}));
        let mut seen = 0u64;
        for _ in 0..calls {
            match v["mode"].as_str() {
                Some("text") => seen += u64::from(call(&text)?.attempts().is_some()),
                Some("structured") => seen += u64::from(call(&structured)?.data().is_some()),
                _ => seen += u64::from(call_accounting().attempts),
            }
        }
        Ok(json!({"calls": calls, "seen": seen}).to_string())
    }
}

callai_sdk::export_node!(BenchCalls);

fn main() {}

//! A pack for the benchmarks: `{"calls": N, "mode": "noop" | "text" | "structured"}`
//! makes N imported calls of that kind. `noop` calls `call-accounting`, an
//! import that does nothing but answer.

use callai_sdk::{Node, NodeError, Request, call, call_accounting};
use serde::Deserialize;
use serde_json::{Value, json};

struct BenchCalls;

#[derive(Deserialize)]
struct Input {
    calls: u64,
    #[serde(default)]
    mode: String,
}

impl Node for BenchCalls {
    type Input = Input;
    type Output = Value;

    fn run(input: Input) -> Result<Value, NodeError> {
        let text = Request::new().user("hi").max_tokens(16);
        let structured = text
            .clone()
            .schema(json!({"type": "object", "required": ["a"]}));
        let mut seen = 0u64;
        for _ in 0..input.calls {
            match input.mode.as_str() {
                "text" => seen += u64::from(call(&text)?.attempts().is_some()),
                "structured" => seen += u64::from(call(&structured)?.data().is_some()),
                _ => seen += u64::from(call_accounting().attempts),
            }
        }
        Ok(json!({"calls": input.calls, "seen": seen}))
    }
}

callai_sdk::export_node!(BenchCalls);

fn main() {}

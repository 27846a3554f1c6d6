//! A pack that makes several text calls in a row: input `{"calls": N}`,
//! output `{"answers": [...], "requests": total attempts}`.

use callai_sdk::{Node, NodeError, Request, call, log};
use serde_json::{Value, json};

struct MultiCall;

impl Node for MultiCall {
    fn run(input: &str) -> Result<String, NodeError> {
        let input: Value = serde_json::from_str(input)?;
        let calls = input["calls"].as_u64().unwrap_or(1);
        let mut answers = Vec::new();
        let mut requests = 0;
        for i in 0..calls {
            log::info(&format!("call {i}"));
            let response = call(&Request::new().user(format!("question {i}")))?;
            requests += response.attempts().map_or(1, |a| a.count);
            answers.push(response.content().unwrap_or_default().to_owned());
        }
        Ok(json!({"answers": answers, "requests": requests}).to_string())
    }
}

callai_sdk::export_node!(MultiCall);

fn main() {}

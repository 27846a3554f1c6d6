//! A pack that makes several text calls in a row: input `{"calls": N}`,
//! output `{"answers": [...], "requests": total attempts}`.

use callai_sdk::{Node, NodeError, Request, call, log};
use serde::Deserialize;
use serde_json::{Value, json};

struct MultiCall;

#[derive(Deserialize)]
struct Input {
    calls: u64,
}

impl Node for MultiCall {
    type Input = Input;
    type Output = Value;

    fn run(input: Input) -> Result<Value, NodeError> {
        let mut answers = Vec::new();
        let mut requests = 0;
        for i in 0..input.calls {
            log::info(&format!("call {i}"));
            let response = call(&Request::new().user(format!("question {i}")))?;
            requests += response.attempts().map_or(1, |a| a.count);
            answers.push(response.content().unwrap_or_default().to_owned());
        }
        Ok(json!({"answers": answers, "requests": requests}))
    }
}

callai_sdk::export_node!(MultiCall);

fn main() {}

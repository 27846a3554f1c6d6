//! A pack that sends a typed request of `{"count": N}` empty messages: tiny
//! in text, large on the wire.

use callai_sdk::{Node, NodeError, Request, call};
use serde::Deserialize;
use serde_json::{Value, json};

struct ManyMessages;

#[derive(Deserialize)]
struct Input {
    count: usize,
}

impl Node for ManyMessages {
    type Input = Input;
    type Output = Value;

    fn run(input: Input) -> Result<Value, NodeError> {
        let request = (0..input.count).fold(Request::new(), |r, _| r.user(""));
        Ok(match call(&request) {
            Ok(r) => json!({"result": r.to_json()}),
            Err(e) => json!({"error": e.to_json()}),
        })
    }
}

callai_sdk::export_node!(ManyMessages);

fn main() {}

//! A pack that floods the host's log: `{"lines": N, "bytes": M}` logs N
//! messages of M bytes each, then succeeds.

use callai_sdk::{Node, NodeError, log};
use serde::Deserialize;

struct LogFlood;

#[derive(Deserialize)]
struct Input {
    lines: usize,
    bytes: usize,
}

impl Node for LogFlood {
    type Input = Input;
    type Output = usize;

    fn run(input: Input) -> Result<usize, NodeError> {
        let message = "x".repeat(input.bytes);
        for _ in 0..input.lines {
            log::info(&message);
        }
        Ok(input.lines)
    }
}

callai_sdk::export_node!(LogFlood);

fn main() {}

//! A pack that reads the clocks and the random source, and makes one call:
//! its output is what the sandbox gave it, for replay to compare.

use callai_sdk::{Node, NodeError, Request, call};
use serde_json::{Value, json};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct ClockRandom;

impl Node for ClockRandom {
    type Input = Value;
    type Output = Value;

    fn run(_input: Value) -> Result<Value, NodeError> {
        let start = Instant::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| NodeError::new(e.to_string()))?;
        let hashed: u64 =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 7u8);
        let answer = call(&Request::new().user("hi"))?;
        Ok(json!({
            "wallMicros": wall.to_string(),
            "elapsedNanos": start.elapsed().as_nanos().to_string(),
            "random": random,
            "hashSeed": hashed.to_string(),
            "answer": answer.content(),
        }))
    }
}

callai_sdk::export_node!(ClockRandom);

fn main() {}

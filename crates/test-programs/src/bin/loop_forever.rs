//! A pack that computes forever.

use callai_sdk::{NodeError, RawNode};

struct LoopForever;

impl RawNode for LoopForever {
    fn run(input: &str) -> Result<String, NodeError> {
        let mut x = input.len() as u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

callai_sdk::export_node!(raw LoopForever);

fn main() {}

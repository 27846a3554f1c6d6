//! A pack that allocates without end.

use callai_sdk::{NodeError, RawNode};

struct AllocForever;

impl RawNode for AllocForever {
    fn run(_input: &str) -> Result<String, NodeError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

callai_sdk::export_node!(raw AllocForever);

fn main() {}

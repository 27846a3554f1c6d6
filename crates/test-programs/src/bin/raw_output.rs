//! A pack whose output is not JSON and holds terminal escape sequences.

use callai_sdk::{NodeError, RawNode};

struct RawOutput;

impl RawNode for RawOutput {
    fn run(_input: &str) -> Result<String, NodeError> {
        Ok("\u{1b}[2J\u{1b}[31mred alert\u{1b}[0m\u{7}".to_owned())
    }
}

callai_sdk::export_node!(raw RawOutput);

fn main() {}

//! A pack that calls ctx.callAI in a tight loop, ignoring every answer.

use callai_sdk::{NodeError, RawNode, call_json};

struct CallLoop;

impl RawNode for CallLoop {
    fn run(_input: &str) -> Result<String, NodeError> {
        loop {
            let _ = call_json(r#"{"messages": [{"role": "user", "content": "again"}]}"#);
        }
    }
}

callai_sdk::export_node!(raw CallLoop);

fn main() {}

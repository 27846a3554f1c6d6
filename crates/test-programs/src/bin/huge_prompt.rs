//! A pack that sends a prompt of `{"megabytes": N}` megabytes (100 by default).

use callai_sdk::{NodeError, RawNode, Request, call};

struct HugePrompt;

impl RawNode for HugePrompt {
    fn run(input: &str) -> Result<String, NodeError> {
        let v: serde_json::Value = serde_json::from_str(input).unwrap_or_default();
        let megabytes = v["megabytes"].as_u64().unwrap_or(100) as usize;
        let prompt = "x".repeat(megabytes << 20);
        let response = call(&Request::new().user(prompt))?;
        Ok(response.to_json().to_string())
    }
}

callai_sdk::export_node!(raw HugePrompt);

fn main() {}

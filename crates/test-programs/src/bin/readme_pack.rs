//! The pack of the README's "Writing a pack", verbatim between the markers:
//! `tests/all/readme_pack.rs` checks that the README still shows exactly
//! this, and runs it. (The README's crate is a `cdylib`; this one is a
//! test-programs binary, hence the empty `main` after the end marker.)

// README: begin
use callai_sdk::{Node, NodeError, Request, Retry, call_accounting, call_as};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize)]
struct Input {
    premise: String,
}

#[derive(Deserialize, Serialize)]
struct Scene {
    scene: String,
}

#[derive(Serialize)]
struct Output {
    scene: Scene,
    requests: u32,
}

struct Draft;

impl Node for Draft {
    type Input = Input;
    type Output = Output;

    fn run(input: Input) -> Result<Output, NodeError> {
        let mut request = Request::new()
            .system("You write short scenes.")
            .user(input.premise)
            .max_tokens(2000)
            .schema(json!({"type": "object", "required": ["scene"],
                           "properties": {"scene": {"type": "string"}}}));
        // Doing your own repair? Turn host retries off — only if the host honours it.
        if call_accounting().retry_policy {
            request = request.retry(Retry::off());
        }
        let scene = call_as::<Scene>(&request)?; // typed structured call
        let requests = scene.response.attempts().map_or(1, |a| a.count); // real provider requests
        log::info!("the scene took {requests} requests");
        Ok(Output {
            scene: scene.data,
            requests,
        })
    }
}

callai_sdk::export_node!(Draft);
// README: end

fn main() {}

//! A pack that traps: it makes one call, then panics (a wasm `unreachable`).

use callai_sdk::{NodeError, RawNode, Request, call};

struct Trap;

impl RawNode for Trap {
    fn run(input: &str) -> Result<String, NodeError> {
        let _ = call(&Request::new().user(input));
        panic!("this pack traps on purpose");
    }
}

callai_sdk::export_node!(raw Trap);

fn main() {}

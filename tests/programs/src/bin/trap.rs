//! A pack that traps: it makes one call, then panics (a wasm `unreachable`).

use callai_sdk::{Node, NodeError, Request, call};

struct Trap;

impl Node for Trap {
    fn run(input: &str) -> Result<String, NodeError> {
        let _ = call(&Request::new().user(input));
        panic!("this pack traps on purpose");
    }
}

callai_sdk::export_node!(Trap);

fn main() {}

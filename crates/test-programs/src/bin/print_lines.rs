//! A pack that writes to its standard output and error, as `console.log`
//! and Python's `print` do: `{"lines": N}` prints N numbered lines, one
//! call between the first and the rest, a line on stderr, and a last line
//! without its newline; then succeeds.

use callai_sdk::{Node, NodeError, Request, call};
use serde::Deserialize;
use std::io::Write;

struct PrintLines;

#[derive(Deserialize)]
struct Input {
    lines: usize,
}

impl Node for PrintLines {
    type Input = Input;
    type Output = usize;

    fn run(input: Input) -> Result<usize, NodeError> {
        println!("line 0");
        call(&Request::new().user("between"))?;
        for i in 1..input.lines {
            println!("line {i}");
        }
        eprintln!("on stderr");
        print!("no newline");
        let _ = std::io::stdout().flush();
        Ok(input.lines)
    }
}

callai_sdk::export_node!(PrintLines);

fn main() {}

//! The Book AI pack's scripts and input, as its README section runs them.

use serde_json::{Value, json};

/// One of the pack's mock scripts: `clean`, or `truncation-and-violation`
/// (any other name).
pub fn script(name: &str) -> Value {
    let text = match name {
        "clean" => include_str!("../examples/bookai-scene/scripts/clean.json"),
        _ => include_str!("../examples/bookai-scene/scripts/truncation-and-violation.json"),
    };
    serde_json::from_str(text).unwrap()
}

/// The pack's input: the README's premise and budget, host retries on or
/// off, at most `max_calls` requests.
pub fn input(host_retries: bool, max_calls: u32) -> String {
    json!({"premise": "A lighthouse keeper finds an old letter.", "maxCalls": max_calls,
           "maxOutputTokens": 12000, "maxTokens": 1500, "hostRetries": host_retries})
    .to_string()
}

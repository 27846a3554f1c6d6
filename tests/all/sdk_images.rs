//! The SDKs' image part (issue 34, item 4): what `user_with_images`
//! builds is a request the host takes, with its images. The Python SDK's
//! builder is plain Python, run here as a pack author's code would run it
//! (the Rust SDK's has its unit test in `guest-sdk`).

use callai_engine::wire::{CallRequest, RetryField};
use std::process::Command;

const URL: &str = "data:image/png;base64,iVBORw0KGgo=";

/// The request `json` as the host reads it: its first message's images.
fn images_of(json: &str) -> Vec<(String, Option<String>)> {
    let request = CallRequest::from_json(json, RetryField::Honoured)
        .unwrap_or_else(|e| panic!("the host refuses {json}: {e}"));
    request.messages[0]
        .images
        .iter()
        .map(|i| (i.url.clone(), i.detail.clone()))
        .collect()
}

#[test]
fn the_python_sdk_builds_a_user_message_with_images() {
    let sdk = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk-py/src");
    let script = format!(
        "import json\nfrom callai_sdk import Image, Request\n\
         r = Request().user_with_images('what is it?', [Image('{URL}', detail='low')])\n\
         print(json.dumps(r.to_json()))"
    );
    let out = match Command::new("python3")
        .arg("-c")
        .arg(&script)
        .env("PYTHONPATH", sdk)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "python3: {e}");
            eprintln!("skipped: no python3 here ({e})");
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).unwrap();
    assert_eq!(images_of(&json), [(URL.to_owned(), Some("low".to_owned()))]);
}

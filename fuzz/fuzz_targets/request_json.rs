//! The request JSON parser: never panics; every refusal is a
//! validation_error naming a field; what parses is within the spec's bounds.
#![no_main]

use callai_engine::wire::{CallRequest, ErrorCode, RetryField};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for retry_field in [RetryField::Honoured, RetryField::Ignored] {
        match CallRequest::from_json(text, retry_field) {
            Ok(request) => {
                assert!(!request.messages.is_empty());
                assert!(request.max_tokens != Some(0));
                let cap = request.retry.and_then(|r| r.max_attempts);
                assert!(cap.is_none_or(|n| (1..=16).contains(&n)));
                let again = serde_json::to_string(&request).unwrap();
                assert_eq!(CallRequest::from_json(&again, retry_field).unwrap(), request);
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::ValidationError);
                assert!(e.field().is_some(), "{e}");
            }
        }
    }
});

//! The request JSON parser and validator: never panics; every refusal is a
//! validation_error naming a field.
#![no_main]

use callai_host::{CallRequest, ErrorCode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for honour_retry in [true, false] {
        match CallRequest::from_json(text, honour_retry) {
            Ok(request) => {
                // What parses, validates, and re-reads to itself.
                request.validate(honour_retry).unwrap();
                let again = serde_json::to_string(&request).unwrap();
                assert_eq!(CallRequest::from_json(&again, honour_retry).unwrap(), request);
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::ValidationError);
                assert!(e.field().is_some(), "{e}");
            }
        }
    }
});

//! Lenient JSON recovery: never panics, and a direct recovery is exactly
//! what a strict parse gives.
#![no_main]

use callai_engine::fuzzing::{RecoveryPath, recover};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok((value, RecoveryPath::Direct)) = recover(text) {
        assert_eq!(serde_json::from_str::<serde_json::Value>(text.trim()).unwrap(), value);
    }
});

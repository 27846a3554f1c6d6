//! The mock script parser: never panics; what parses round-trips.
#![no_main]

use callai_engine::MockScript;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(script) = MockScript::from_json(text) {
        let again = serde_json::to_string(&script).unwrap();
        assert_eq!(MockScript::from_json(&again).unwrap(), script);
    }
});

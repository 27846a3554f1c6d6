//! The host config parser: never panics; what parses is in range.
#![no_main]

use callai_host::HostConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = HostConfig::from_toml(text) {
        config.validate().unwrap();
    }
});

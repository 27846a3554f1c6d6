//! The host config parser: never panics; what parses is in the documented
//! ranges (checked here, not by the parser).
#![no_main]

use callai_engine::HostConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = HostConfig::from_toml(text) {
        assert!((1..=16).contains(&config.retry.max_retry_attempts));
        assert!((1..=8).contains(&config.retry.truncation_budget_multiplier));
        assert!(config.retry.default_max_tokens <= config.retry.provider_max_tokens);
        assert!(config.limits.fuel >= 1);
        assert!(config.providers.values().all(|p| p.timeout_ms.is_none_or(|t| t >= 1)));
    }
});

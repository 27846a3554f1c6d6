//! The host config against its documented defaults and errors.

use super::*;

#[test]
fn empty_config_takes_the_documented_defaults() {
    let c = HostConfig::from_toml("").unwrap();
    assert_eq!(c.retry.max_retry_attempts, 3);
    assert_eq!(c.retry.truncation_budget_multiplier, 2);
    assert_eq!(c.retry.default_max_tokens, 4000);
    assert_eq!(c.retry.provider_max_tokens, 64000);
    assert!(c.retry.nl_fallback);
    assert!(c.call_accounting.attempts && c.call_accounting.retry_policy);
    assert!(c.mock.native);
    assert_eq!(c.defaults.provider, "mock");
}

#[test]
fn the_design_example_parses() {
    let c = HostConfig::from_toml(
        r#"
[retry]
maxRetryAttempts = 5
truncationBudgetMultiplier = 4
defaultMaxTokens = 1000
providerMaxTokens = 8000
nlFallback = false
[callAccounting]
attempts = false
retryPolicy = true
[policy]
allowedProviders = ["mock", "openai"]
[mock]
native = false
[defaults]
provider = "mock"
[providers.openai]
baseUrl = "http://127.0.0.1:11434/v1"
apiKeyEnv = "OPENAI_API_KEY"
model = "llama3"
native = false
timeoutMs = 1000
"#,
    )
    .unwrap();
    assert_eq!(c.retry.max_retry_attempts, 5);
    assert!(!c.call_accounting.attempts);
    assert!(!c.mock.native);
    assert_eq!(c.provider_names(), vec!["mock", "openai"]);
    assert!(!c.provider_allowed("anthropic"));
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    for (text, key) in [
        ("[retry]\nmaxRetries = 3", "maxRetries"),
        ("[bogus]\nx = 1", "bogus"),
        ("[callAccounting]\nattempt = true", "attempt"),
        ("[providers.gemini]\nmodel = \"x\"", "gemini"),
    ] {
        let err = HostConfig::from_toml(text).unwrap_err();
        assert!(err.to_string().contains(key), "{err} should name {key}");
    }
}

#[test]
fn out_of_range_values_are_errors_naming_the_key() {
    for (text, key) in [
        ("[retry]\nmaxRetryAttempts = 0", "retry.maxRetryAttempts"),
        ("[retry]\nmaxRetryAttempts = 17", "retry.maxRetryAttempts"),
        (
            "[retry]\ntruncationBudgetMultiplier = 9",
            "retry.truncationBudgetMultiplier",
        ),
        ("[retry]\ndefaultMaxTokens = 0", "retry.defaultMaxTokens"),
        (
            "[retry]\ndefaultMaxTokens = 9000\nproviderMaxTokens = 8000",
            "retry.defaultMaxTokens",
        ),
        (
            "[policy]\nallowedProviders = [\"openai\"]",
            "policy.allowedProviders[0]",
        ),
        ("[defaults]\nprovider = \"openai\"", "defaults.provider"),
        (
            "[providers.openai]\ntimeoutMs = 0",
            "providers.openai.timeoutMs",
        ),
    ] {
        let err = HostConfig::from_toml(text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{err}");
        assert!(err.to_string().contains(key));
    }
    let err = HostConfig::from_toml("[retry]\nmaxRetryAttempts = -1").unwrap_err();
    assert!(err.to_string().contains("maxRetryAttempts"), "{err}");
    let err = HostConfig::from_toml("[retry]\nnlFallback = 1").unwrap_err();
    assert!(err.to_string().contains("nlFallback"), "{err}");
}

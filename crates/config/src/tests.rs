//! The whole config file against its documented defaults and errors.

use super::*;
use callai_providers::{ProviderKind, ProviderSettings};

/// The configured provider sections with their defaults filled in.
fn provider_settings(c: &Config) -> Vec<ProviderSettings> {
    c.providers
        .iter()
        .map(|(name, section)| section.settings(name).unwrap())
        .collect()
}

#[test]
fn empty_config_takes_the_documented_defaults() {
    let c = Config::from_toml("").unwrap();
    assert_eq!(c.host.retry.max_retry_attempts, 3);
    assert_eq!(c.host.retry.truncation_budget_multiplier, 2);
    assert_eq!(c.host.retry.default_max_tokens, 4000);
    assert_eq!(c.host.retry.provider_max_tokens, 64000);
    assert!(c.host.retry.nl_fallback);
    assert_eq!(
        (
            c.host.retry.backoff_base_ms,
            c.host.retry.backoff_max_ms,
            c.host.retry.max_retry_after_ms
        ),
        (500, 8000, 60_000)
    );
    assert!(c.host.call_accounting.attempts && c.host.call_accounting.retry_policy);
    assert!(c.host.mock.native);
    assert_eq!(c.host.defaults.provider, "mock");
    assert!(c.providers.is_empty());
}

#[test]
fn the_design_example_parses() {
    let c = Config::from_toml(
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
    assert_eq!(c.host.retry.max_retry_attempts, 5);
    assert!(!c.host.call_accounting.attempts);
    assert!(!c.host.mock.native);
    let settings = provider_settings(&c);
    assert_eq!(settings.len(), 1);
    assert_eq!(settings[0].kind, ProviderKind::Openai);
    assert_eq!(settings[0].model, "llama3");
    assert!(!c.host.provider_allowed("anthropic"));
}

#[test]
fn providers_of_one_kind_live_side_by_side_by_name() {
    let c = Config::from_toml(
        r#"
[providers.openai]
[providers.local]
kind = "openai"
baseUrl = "http://127.0.0.1:11434/v1"
apiKeyEnv = ""
[providers.claude]
kind = "anthropic"
"#,
    )
    .unwrap();
    let s = provider_settings(&c);
    let by_name: Vec<(&str, ProviderKind, &str)> = s
        .iter()
        .map(|p| (p.name.as_str(), p.kind, p.base_url.as_str()))
        .collect();
    assert_eq!(
        by_name,
        [
            (
                "claude",
                ProviderKind::Anthropic,
                "https://api.anthropic.com/v1"
            ),
            ("local", ProviderKind::Openai, "http://127.0.0.1:11434/v1"),
            ("openai", ProviderKind::Openai, "https://api.openai.com/v1"),
        ]
    );
    assert_eq!(s[1].api_key_env, "");
    assert_eq!(s[2].api_key_env, "OPENAI_API_KEY");
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    for (text, key) in [
        ("[retry]\nmaxRetries = 3", "maxRetries"),
        ("[bogus]\nx = 1", "bogus"),
        ("[callAccounting]\nattempt = true", "attempt"),
        ("[providers.openai]\nmodels = \"x\"", "models"),
        ("[providers.cohere]\nmodel = \"x\"", "cohere"),
        ("[providers.local]\nkind = \"cohere\"", "cohere"),
    ] {
        let err = Config::from_toml(text).unwrap_err();
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
        ("[mock]\nlatencyMs = 600001", "mock.latencyMs"),
        ("[retry]\nbackoffBaseMs = 600001", "retry.backoffBaseMs"),
        (
            "[retry]\nbackoffBaseMs = 900\nbackoffMaxMs = 800",
            "retry.backoffMaxMs",
        ),
        (
            "[retry]\nmaxRetryAfterMs = 3600001",
            "retry.maxRetryAfterMs",
        ),
        (
            "[providers.openai]\ntimeoutMs = 0",
            "providers.openai.timeoutMs",
        ),
        (
            "[providers.openai]\nbaseUrl = \"ftp://x\"",
            "providers.openai.baseUrl",
        ),
        ("[providers.cohere]\nmodel = \"x\"", "providers.cohere.kind"),
        (
            "[providers.openai]\nkind = \"anthropic\"",
            "providers.openai.kind",
        ),
        ("[providers.mock]\nkind = \"openai\"", "providers.mock"),
        ("[providers.\"a b\"]\nkind = \"openai\"", "providers.a b"),
    ] {
        let err = Config::from_toml(text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{text}: {err}");
        assert!(err.to_string().contains(key));
    }
    let err = Config::from_toml("[retry]\nmaxRetryAttempts = -1").unwrap_err();
    assert!(err.to_string().contains("maxRetryAttempts"), "{err}");
    let err = Config::from_toml("[retry]\nnlFallback = 1").unwrap_err();
    assert!(err.to_string().contains("nlFallback"), "{err}");
}

#[test]
fn the_service_sections_take_the_design_defaults() {
    let c = Config::from_toml(
        r#"
[telemetry]
otlpEndpoint = "http://127.0.0.1:4318"
serviceName = "callai"
[server]
listen = "127.0.0.1:8080"
tokenEnv = ""
maxPackBytes = 67108864
[runlog]
url = ""
leaseMs = 10000
"#,
    )
    .unwrap();
    assert_eq!(c.server, ServerConfig::default());
    assert_eq!(c.runlog, RunLogConfig::default());
    assert_eq!(
        c.telemetry.otlp_endpoint.as_deref(),
        Some("http://127.0.0.1:4318")
    );
    assert_eq!(c.server.listen_addr().unwrap().port(), 8080);
}

#[test]
fn bad_service_values_name_their_key() {
    for (text, key) in [
        ("[server]\nlisten = \"localhost\"", "server.listen"),
        ("[server]\ntokenEnv = \"MY TOKEN\"", "server.tokenEnv"),
        ("[server]\nmaxPackBytes = 1", "server.maxPackBytes"),
        (
            "[telemetry]\notlpEndpoint = \"ftp://x\"",
            "telemetry.otlpEndpoint",
        ),
        ("[telemetry]\nserviceName = \"\"", "telemetry.serviceName"),
        ("[runlog]\nleaseMs = 5", "runlog.leaseMs"),
    ] {
        let e = Config::from_toml(text).unwrap_err();
        assert_eq!(e.key(), Some(key), "{text}: {e}");
    }
    let e = Config::from_toml("[server]\nport = 1").unwrap_err();
    assert!(e.to_string().contains("port"), "{e}");
}

/// `[tenants.NAME]`, as the file reads it.
mod tenants {
    use callai_engine::budget::{Limits, Window};
    use callai_engine::config::ConfigError;

    fn parse(toml: &str) -> Result<crate::Config, ConfigError> {
        crate::Config::from_toml(toml)
    }

    #[test]
    fn a_tenant_with_a_budget_parses() {
        let c = parse(
            "[tenants.bookai]\ntokenEnv = \"BOOKAI_TOKEN\"\nallowedProviders = [\"mock\"]\n\
             [tenants.bookai.budget]\nrequests = 10\noutputTokens = 2000\ncost = 5\nwindow = \"1h\"\n",
        )
        .unwrap();
        let t = &c.tenants["bookai"];
        assert_eq!(t.budget.window(), Window::Hour);
        assert_eq!(
            t.budget.limits(),
            Limits {
                requests: Some(10),
                output_tokens: Some(2000),
                input_tokens: None,
                cost: Some(5_000_000_000),
            }
        );
        assert_eq!(t.budget.currency, "USD");
    }

    #[test]
    fn bad_sections_name_their_key() {
        let cases = [
            ("[tenants.a]\ntokenEnv = \"T\"\nbudgett = 1\n", "budgett"),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nrequests = -1\n",
                "tenants.a.budget.requests",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\noutputTokens = -5\n",
                "tenants.a.budget.outputTokens",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncost = -0.5\n",
                "tenants.a.budget.cost",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncost = nan\n",
                "tenants.a.budget.cost",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncurrency = \"\"\n",
                "tenants.a.budget.currency",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nwindow = \"2d\"\n",
                "tenants.a.budget.window",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nrequestz = 5\n",
                "requestz",
            ),
            ("[tenants.a]\n", "tenants.a.tokenEnv"),
            ("[tenants.\"a b\"]\ntokenEnv = \"T\"\n", "tenants.a b"),
            ("[tenants.admin]\ntokenEnv = \"T\"\n", "tenants.admin"),
        ];
        for (toml, key) in cases {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }
}

//! What the host advertises: the `aiProviders` facet with RFC 0248
//! `callAccounting`, and the RFC 0032 `capabilities.envelopes.reliability`.

use crate::config::HostConfig;
use serde_json::{Value, json};

/// The RFC 0032 events this host emits.
pub const RELIABILITY_EVENTS: [&str; 6] = [
    "envelope.retry.attempted",
    "envelope.retry.exhausted",
    "envelope.truncated",
    "envelope.refusal",
    "envelope.nlToFormat.engaged",
    "envelope.recovery.applied",
];

/// The `aiProviders` facet: the providers a request may name, and the
/// `callAccounting` flags of RFC 0248 §C as the config sets them.
pub fn ai_providers(config: &HostConfig) -> Value {
    let providers: Vec<&str> = config
        .provider_names()
        .into_iter()
        .filter(|p| config.provider_allowed(p))
        .collect();
    let flags = config.call_accounting;
    json!({
        "providers": providers,
        "callAccounting": {
            "attempts": flags.attempts,
            "retryPolicy": flags.retry_policy,
        },
    })
}

/// `capabilities.envelopes.reliability` (RFC 0032, 0033).
pub fn reliability(config: &HostConfig) -> Value {
    json!({
        "supported": true,
        "events": RELIABILITY_EVENTS,
        "maxRetryAttempts": config.retry.max_retry_attempts,
        "completion": {
            "distinguishesTruncation": true,
            "truncationBudgetMultiplier": config.retry.truncation_budget_multiplier,
        },
    })
}

/// What `callai facet` prints: the facet, and the capabilities it relies on.
pub fn document(config: &HostConfig) -> Value {
    json!({
        "aiProviders": ai_providers(config),
        "capabilities": {"envelopes": {"reliability": reliability(config)}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_the_config() {
        let mut c = HostConfig::default();
        assert_eq!(
            ai_providers(&c)["callAccounting"],
            json!({"attempts": true, "retryPolicy": true})
        );
        c.call_accounting.retry_policy = false;
        assert_eq!(ai_providers(&c)["callAccounting"]["retryPolicy"], false);
        assert_eq!(ai_providers(&c)["providers"], json!(["mock"]));
        c.retry.max_retry_attempts = 7;
        assert_eq!(reliability(&c)["maxRetryAttempts"], 7);
    }
}

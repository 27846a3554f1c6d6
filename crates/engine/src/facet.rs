//! What a host advertises: the `aiProviders` facet with RFC 0248
//! `callAccounting`, and the RFC 0032 `capabilities.envelopes.reliability`.

use crate::Host;
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

/// The facet's JSON Schema (`aiProviders.schema.json` of the spec, with
/// RFC 0248 §C applied), which [`ai_providers`] always satisfies.
pub const SCHEMA: &str = include_str!("../schema/aiProviders.schema.json");

/// The `aiProviders` facet: the providers a request may name (the policy
/// applied), the `callAccounting` flags of RFC 0248 §C, and `toolCalls`
/// (requests may offer tools; additive).
pub fn ai_providers(host: &Host) -> Value {
    let flags = host.config().call_accounting;
    json!({
        "providers": host.allowed_providers(),
        "callAccounting": {
            "attempts": flags.attempts,
            "retryPolicy": flags.retry_policy,
        },
        "toolCalls": host.config().policy.tool_calls,
    })
}

/// `capabilities.envelopes.reliability` (RFC 0032, 0033).
pub fn reliability(host: &Host) -> Value {
    let retry = &host.config().retry;
    json!({
        "supported": true,
        "events": RELIABILITY_EVENTS,
        "maxRetryAttempts": retry.max_retry_attempts,
        "completion": {
            "distinguishesTruncation": true,
            "truncationBudgetMultiplier": retry.truncation_budget_multiplier,
        },
    })
}

/// What `callai facet` prints: the facet, and the capabilities it relies on.
pub fn document(host: &Host) -> Value {
    json!({
        "aiProviders": ai_providers(host),
        "capabilities": {"envelopes": {"reliability": reliability(host)}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostConfig;

    fn host(edit: impl FnOnce(&mut HostConfig)) -> Host {
        let mut c = HostConfig::default();
        edit(&mut c);
        Host::builder(c).build().unwrap()
    }

    #[test]
    fn flags_follow_the_config() {
        assert_eq!(
            ai_providers(&host(|_| {}))["callAccounting"],
            json!({"attempts": true, "retryPolicy": true})
        );
        let h = host(|c| c.call_accounting.retry_policy = false);
        assert_eq!(ai_providers(&h)["callAccounting"]["retryPolicy"], false);
        assert_eq!(ai_providers(&h)["providers"], json!(["mock"]));
        assert_eq!(ai_providers(&h)["toolCalls"], true);
        let h = host(|c| c.policy.tool_calls = false);
        assert_eq!(ai_providers(&h)["toolCalls"], false);
        let h = host(|c| c.retry.max_retry_attempts = 7);
        assert_eq!(reliability(&h)["maxRetryAttempts"], 7);
    }

    #[test]
    fn the_facet_validates_against_its_schema_for_every_flag_setting() {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for (attempts, retry_policy) in [(true, true), (true, false), (false, true), (false, false)]
        {
            let h = host(|c| {
                c.call_accounting.attempts = attempts;
                c.call_accounting.retry_policy = retry_policy;
            });
            let f = ai_providers(&h);
            let errors: Vec<String> = validator.iter_errors(&f).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{f}: {errors:?}");
        }
        // The schema rejects what RFC 0248 §C forbids: an unknown callAccounting key.
        let bad = json!({"providers": [], "callAccounting": {"attempts": true, "tokens": true}});
        assert!(!validator.is_valid(&bad));
    }
}

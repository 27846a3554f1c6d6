//! A limit on a caller: `[[tenants.NAME.limits]]` in the config, a key's
//! `limits` over the API. Each counts one or more keys over its own window
//! (`per`), and a caller may have several at once:
//!
//! ```toml
//! [[tenants.team.limits]]
//! requests = 600
//! per = "1m"                       # "1m" | "1h" | "1d" | "30d" | "none"
//! [[tenants.team.limits]]
//! outputTokens = 200000
//! per = "1m"
//! [[tenants.team.limits]]
//! cost = 50.0                      # in `currency` (USD unless set)
//! per = "1d"
//! ```
//!
//! `[tenants.NAME.budget]` (one window) stays valid: it is one limit.

use callai_engine::budget::{Limits, Window};
use callai_engine::config::{ConfigError, invalid};
use callai_engine::cost::{currency_code_problem, to_nanos};
use serde::{Deserialize, Serialize};

/// One limit: what it counts (each key unset for uncounted) and per what
/// window. Signed, so that a negative amount is refused naming its key
/// rather than failing to parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitConfig {
    /// Provider requests (attempts) per window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<i64>,
    /// Input tokens per window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    /// Output tokens per window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    /// Money per window, in `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The currency of `cost` (`USD`).
    #[serde(default = "usd")]
    pub currency: String,
    /// The window: `"1m"`, `"1h"`, `"1d"`, `"30d"` or `"none"` (for the
    /// caller's whole life).
    pub per: String,
}

fn usd() -> String {
    "USD".into()
}

/// A config's amounts (signed, checked elsewhere) as the ledger's limits:
/// what a budget and a limit both are.
pub(super) fn limits_of(
    requests: Option<i64>,
    output_tokens: Option<i64>,
    input_tokens: Option<i64>,
    cost: Option<f64>,
) -> Limits {
    let n = |v: Option<i64>| v.map(|v| v.max(0) as u64);
    Limits {
        requests: n(requests),
        output_tokens: n(output_tokens),
        input_tokens: n(input_tokens),
        cost: cost.map(to_nanos),
    }
}

impl LimitConfig {
    /// The amounts, checked (see [`LimitConfig::problem`]).
    pub fn limits(&self) -> Limits {
        limits_of(
            self.requests,
            self.output_tokens,
            self.input_tokens,
            self.cost,
        )
    }

    /// The window, checked.
    pub fn window(&self) -> Window {
        Window::parse(&self.per).unwrap_or_default()
    }

    /// What is wrong with it, as the key (under the limit's own) and why;
    /// `None` when it is right.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        for (k, v) in [
            ("requests", self.requests),
            ("inputTokens", self.input_tokens),
            ("outputTokens", self.output_tokens),
        ] {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Some((k, format!("{v} is negative; a limit is 0 or more")));
            }
        }
        if let Some(cost) = self.cost.filter(|c| !(c.is_finite() && *c >= 0.0)) {
            return Some((
                "cost",
                format!("{cost} is not an amount; a limit is 0 or more"),
            ));
        }
        if let Some(problem) = currency_code_problem(&self.currency) {
            return Some(("currency", problem));
        }
        if Window::parse(&self.per).is_none() {
            return Some((
                "per",
                format!(
                    "{:?} is not a window: \"1m\", \"1h\", \"1d\", \"30d\" or \"none\"",
                    self.per
                ),
            ));
        }
        if self.limits() == Limits::default() {
            return Some((
                "per",
                "a limit counts at least one of requests, inputTokens, outputTokens or cost".into(),
            ));
        }
        None
    }

    /// The name its spend is kept under in the ledger, for the caller
    /// `owner`: the keys it counts and its window (`team:requests/1m`).
    /// Two limits of one caller that count the same keys per the same
    /// window would share it, and are refused.
    pub fn account(&self, owner: &str) -> String {
        let limits = self.limits();
        let keys: Vec<&str> = limits
            .by_key()
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| *k)
            .collect();
        format!("{owner}:{}/{}", keys.join("+"), self.window().as_str())
    }
}

/// Checks a caller's `limits` (their key is `at`, as `tenants.team.limits`):
/// each one right, no two sharing an account, every one in money in
/// `currency` when another of the caller's is (`None`: none yet).
pub fn validate_limits<'a>(
    at: &str,
    owner: &str,
    limits: &'a [LimitConfig],
    mut currency: Option<&'a str>,
) -> Result<(), ConfigError> {
    let mut accounts = Vec::with_capacity(limits.len());
    for (i, limit) in limits.iter().enumerate() {
        let key = |k: &str| format!("{at}[{i}].{k}");
        if let Some((k, why)) = limit.problem() {
            return Err(invalid(&key(k), why));
        }
        let account = limit.account(owner);
        if accounts.contains(&account) {
            return Err(invalid(
                &key("per"),
                format!(
                    "another limit counts the same keys per {}; merge them into one",
                    limit.per
                ),
            ));
        }
        accounts.push(account);
        if limit.cost.is_some() {
            match currency {
                Some(c) if c != limit.currency => {
                    return Err(invalid(
                        &key("currency"),
                        format!(
                            "{} differs from {c}, the currency of another limit in money; a \
                             caller's limits in money share one currency",
                            limit.currency
                        ),
                    ));
                }
                _ => currency = Some(&limit.currency),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(json: &str) -> LimitConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_limit_counts_its_keys_per_its_window_under_its_own_account() {
        let l = limit(r#"{"requests": 600, "cost": 2.5, "per": "1m"}"#);
        assert_eq!(l.window(), Window::Minute);
        assert_eq!(l.limits().requests, Some(600));
        assert_eq!(l.limits().cost, Some(2_500_000_000));
        assert_eq!(l.account("team"), "team:requests+cost/1m");
        assert!(l.problem().is_none());
    }

    #[test]
    fn a_wrong_limit_is_refused_naming_its_key() {
        let problem = |json: &str| limit(json).problem().unwrap().0;
        assert_eq!(problem(r#"{"requests": -1, "per": "1m"}"#), "requests");
        assert_eq!(problem(r#"{"requests": 1, "per": "2m"}"#), "per");
        assert_eq!(problem(r#"{"per": "1m"}"#), "per");
        assert_eq!(
            problem(r#"{"cost": 1, "currency": "usd", "per": "1d"}"#),
            "currency"
        );
        assert!(serde_json::from_str::<LimitConfig>(r#"{"requests": 1}"#).is_err());
        assert!(serde_json::from_str::<LimitConfig>(r#"{"rpm": 1, "per": "1m"}"#).is_err());
    }

    #[test]
    fn two_limits_on_one_account_or_two_currencies_are_refused() {
        let a = limit(r#"{"requests": 600, "per": "1m"}"#);
        let b = limit(r#"{"requests": 10, "per": "1m"}"#);
        let e = validate_limits("tenants.t.limits", "t", &[a.clone(), b], None).unwrap_err();
        assert!(e.to_string().contains("tenants.t.limits[1].per"), "{e}");
        let eur = limit(r#"{"cost": 5, "currency": "EUR", "per": "1d"}"#);
        let e = validate_limits("k", "t", &[a.clone(), eur.clone()], Some("USD")).unwrap_err();
        assert!(e.to_string().contains("k[1].currency"), "{e}");
        validate_limits("k", "t", &[a, eur], None).unwrap();
    }
}

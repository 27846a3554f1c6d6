//! `[responseCache]`: answers kept for a while and given again to the same
//! tenant's identical request (issue 53, item 5), off unless set. A section
//! of its own beside `[cache]`, which is the compiled packs'.

use callai_engine::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[responseCache]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ResponseCacheConfig {
    /// `off` (the default) or `exact`: the same body and policy headers.
    pub mode: ResponseCacheMode,
    /// How long an answer is kept: a number and `s`, `m`, `h` or `d`
    /// (`10m` unless said).
    pub ttl: Option<String>,
}

/// `[responseCache] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseCacheMode {
    /// No answer is given again unless asked (`Idempotency-Key`).
    #[default]
    Off,
    /// An identical request of the same tenant gets the kept answer.
    Exact,
}

/// The `ttl` of a section that says none.
const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// The longest `ttl`: 30 days.
const MAX_TTL: Duration = Duration::from_secs(30 * 86_400);

impl ResponseCacheConfig {
    /// Whether answers are kept and given again.
    pub fn on(&self) -> bool {
        self.mode == ResponseCacheMode::Exact
    }

    /// How long an answer is kept.
    pub fn ttl(&self) -> Duration {
        self.ttl
            .as_deref()
            .and_then(parse_ttl)
            .unwrap_or(DEFAULT_TTL)
    }

    /// Checks `ttl`, naming it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let Some(text) = &self.ttl else {
            return Ok(());
        };
        match parse_ttl(text) {
            Some(ttl) if !ttl.is_zero() && ttl <= MAX_TTL => Ok(()),
            _ => Err(invalid(
                "responseCache.ttl",
                format!("{text:?}: a number and s, m, h or d (\"10m\"), from 1s to 30d"),
            )),
        }
    }
}

/// `10m`, `30s`, `2h`, `1d`. Written here: four units, no crate needed.
fn parse_ttl(text: &str) -> Option<Duration> {
    let unit = text.chars().last()?;
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return None,
    };
    let count: u64 = text[..text.len() - 1].parse().ok()?;
    Some(Duration::from_secs(count.checked_mul(seconds)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_a_number_and_a_unit_within_bounds() {
        let config = |ttl: &str| ResponseCacheConfig {
            mode: ResponseCacheMode::Exact,
            ttl: Some(ttl.into()),
        };
        assert_eq!(config("90s").ttl(), Duration::from_secs(90));
        assert_eq!(config("2h").ttl(), Duration::from_secs(7200));
        assert_eq!(ResponseCacheConfig::default().ttl(), DEFAULT_TTL);
        for bad in ["10", "m", "-1m", "0s", "31d", "1w", "1.5h"] {
            let e = config(bad).validate().unwrap_err().to_string();
            assert!(e.contains("responseCache.ttl"), "{bad}: {e}");
        }
        assert!(!ResponseCacheConfig::default().on());
    }
}

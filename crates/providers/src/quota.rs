//! `[providers.NAME.limits]`: a provider's quota, per minute, across every
//! host on one run log: the host sends it no more than this, instead of
//! learning its limits from its 429s.
//!
//! ```toml
//! [providers.openai.limits]
//! requests = 500        # requests a minute
//! tokens = 200000       # input and output tokens together, a minute
//! ```
//!
//! Anthropic counts input and output tokens apart: `inputTokens` and
//! `outputTokens` say so. Each request is held to them at its worst (its
//! `maxTokens` out, its input's bound in) until it ends, then charged what
//! it really used.

use callai_engine::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};

/// A provider's quota per minute; each unset key unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderLimits {
    /// Requests a minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Input and output tokens together, a minute (OpenAI's TPM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Input tokens a minute (Anthropic's ITPM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens a minute (Anthropic's OTPM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

impl ProviderLimits {
    /// Each key with its amount, as the config spells it.
    pub fn by_key(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("requests", self.requests),
            ("tokens", self.tokens),
            ("inputTokens", self.input_tokens),
            ("outputTokens", self.output_tokens),
        ]
    }

    /// Checks the limits of provider `name`: at least one key, each 1 or
    /// more.
    pub fn check(&self, name: &str) -> Result<(), ConfigError> {
        let at = |key: &str| format!("providers.{name}.limits.{key}");
        for (key, amount) in self.by_key() {
            if amount == Some(0) {
                return Err(invalid(
                    &at(key),
                    "must be 1 or more (leave it out for no limit)".into(),
                ));
            }
        }
        if self.by_key().iter().all(|(_, a)| a.is_none()) {
            return Err(invalid(
                &format!("providers.{name}.limits"),
                "limits nothing: set requests, tokens, inputTokens or outputTokens (a minute)"
                    .into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_of_zero_or_of_nothing_is_refused_naming_its_key() {
        let zero = ProviderLimits {
            tokens: Some(0),
            ..Default::default()
        };
        let e = zero.check("openai").unwrap_err().to_string();
        assert!(e.contains("providers.openai.limits.tokens"), "{e}");
        let e = ProviderLimits::default()
            .check("a")
            .unwrap_err()
            .to_string();
        assert!(e.contains("providers.a.limits"), "{e}");
        let ok: ProviderLimits = toml::from_str("requests = 5\noutputTokens = 9").unwrap();
        ok.check("a").unwrap();
        assert_eq!((ok.requests, ok.output_tokens), (Some(5), Some(9)));
        assert!(toml::from_str::<ProviderLimits>("rpm = 5").is_err());
    }
}

//! What an operator reads of each call: `[pricing]`, a price list in the
//! format LiteLLM publishes (`model_prices_and_context_window.json`: per
//! model, its `input_cost_per_token` and `output_cost_per_token`, in USD;
//! a provider's own `[providers.NAME.prices]` wins over it), and `[log]`,
//! the line written for each request.

use callai_engine::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[pricing]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PricingConfig {
    /// The price list's path; relative to the config file's folder when
    /// the config was read from a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// The most a price may be, per million tokens, in any currency: a
    /// price above it (`1e308`, a price list's typo) is refused at start-up
    /// naming its key, as it would make every budget in money meaningless.
    pub max_per_million: f64,
}

impl Default for PricingConfig {
    fn default() -> Self {
        Self {
            file: None,
            max_per_million: MAX_PER_MILLION,
        }
    }
}

/// The default bound on a price, per million tokens: above every model's
/// list price today (the dearest, 600 per million output tokens), with room.
pub const MAX_PER_MILLION: f64 = 1000.0;

/// The largest price list read: a file past it is refused, not read on.
pub const MAX_PRICE_FILE_BYTES: u64 = 64 << 20;

impl PricingConfig {
    /// Checks `maxPerMillion`, naming it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bound = self.max_per_million;
        if !(bound.is_finite() && bound > 0.0 && bound <= 1e9) {
            return Err(invalid(
                "pricing.maxPerMillion",
                format!("{bound} is not a bound on prices: a number over 0, at most 1e9"),
            ));
        }
        Ok(())
    }

    /// Refuses a price of `per_million` at `key` over the bound.
    pub fn check_price(&self, key: &str, per_million: f64) -> Result<(), ConfigError> {
        if per_million > self.max_per_million {
            return Err(invalid(
                key,
                format!(
                    "{per_million} per million tokens is over pricing.maxPerMillion ({}): a \
                     price this large is taken for a mistake (raise the bound if it is not)",
                    self.max_per_million
                ),
            ));
        }
        Ok(())
    }
}

/// `[log]`: the line `callai serve` writes on stderr for each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LogConfig {
    /// `text` (the default), `json`, or `off`.
    pub format: LogFormat,
}

/// How each request's line is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `key=value` after the time, method, path, status and duration.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
    /// No line.
    Off,
}

//! What an operator reads of each call: `[pricing]`, a price list in the
//! format LiteLLM publishes (`model_prices_and_context_window.json`: per
//! model, its `input_cost_per_token` and `output_cost_per_token`, in USD;
//! a provider's own `[providers.NAME.prices]` wins over it), and `[log]`,
//! the line written for each request.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[pricing]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PricingConfig {
    /// The price list's path; relative to the config file's folder when
    /// the config was read from a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
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

//! `[pricing]`: a price list in the format LiteLLM publishes
//! (`model_prices_and_context_window.json`: per model, its
//! `input_cost_per_token` and `output_cost_per_token`, in USD). A
//! provider's own `[providers.NAME.prices]` wins over it.

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

//! A tenant's budget as `[tenants.NAME.budget]` sets it: its limits, the
//! window they count over, and the currency of its money.

use callai_engine::budget::{Limits, Window};
use std::sync::Arc;

/// A tenant's budget: its limits per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The limits; unset keys are unlimited.
    pub limits: Limits,
    /// The window they count over.
    pub window: Window,
    /// The currency of its `cost` limit.
    pub currency: Arc<str>,
}

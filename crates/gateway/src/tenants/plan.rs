//! One limit of a caller as the ledger keeps it: its amounts, the window
//! they count over, the currency of its money, and the account its spend
//! is kept under.

use crate::config::{BudgetConfig, LimitConfig};
use callai_engine::budget::{Limits, Spend, Window};
use std::sync::Arc;

/// A limit on a caller: its amounts per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The amounts; unset keys are unlimited.
    pub limits: Limits,
    /// The window they count over.
    pub window: Window,
    /// The currency of its `cost` limit.
    pub currency: Arc<str>,
    /// Where the ledger keeps its spend: the tenant's name for its
    /// `[tenants.NAME.budget]`, `NAME:keys/per` for one of its `limits`
    /// (a name no tenant can have).
    pub account: Arc<str>,
    /// Whether its `outputTokens` counts input and output tokens together
    /// (a provider's `tokens` a minute): what is reserved and charged is
    /// [`Plan::counted`].
    pub tokens_together: bool,
}

impl Plan {
    /// `[tenants.NAME.budget]` of tenant `name`, when it limits anything.
    pub fn of_budget(name: &str, budget: &BudgetConfig) -> Option<Self> {
        budget.is_limited().then(|| Self {
            limits: budget.limits(),
            window: budget.window(),
            currency: budget.currency.as_str().into(),
            account: name.into(),
            tokens_together: false,
        })
    }

    /// One of the `limits` of the caller `owner` (checked).
    pub fn of_limit(owner: &str, limit: &LimitConfig) -> Self {
        Self {
            limits: limit.limits(),
            window: limit.window(),
            currency: limit.currency.as_str().into(),
            account: limit.account(owner).into(),
            tokens_together: false,
        }
    }

    /// `spend` as this limit counts it: as it is, or with input and output
    /// tokens together in `outputTokens`' place.
    pub fn counted(&self, spend: Spend) -> Spend {
        if !self.tokens_together {
            return spend;
        }
        Spend {
            output_tokens: spend.output_tokens.saturating_add(spend.input_tokens),
            input_tokens: 0,
            ..spend
        }
    }

    /// The key a refusal of `key` names: `tokens` for the output tokens of
    /// a limit that counts them together.
    pub fn key_said(&self, key: &'static str) -> &'static str {
        if self.tokens_together && key == "outputTokens" {
            "tokens"
        } else {
            key
        }
    }

    /// The end of the window `now_ms` falls in; `None` for a lifetime one.
    pub fn resets_at_ms(&self, now_ms: u64) -> Option<u64> {
        self.window.end_ms(self.window.start_ms(now_ms))
    }
}

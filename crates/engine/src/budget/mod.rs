//! Budgets a call is held to: before it sends anything its worst case is
//! reserved ([`worst_case`]); when it settles it is charged what its
//! attempts really were and the rest is released. The engine only computes
//! and tallies; where reservations live (a run log's database, so that many
//! hosts share one budget) is the [`Budget`]'s business.
//!
//! A refused reservation is the call's `policy_denied` error (the WIT's
//! code for a refusal made before any request), with `details.reason =
//! "budget_exceeded"`, the budget key, what is left and what the call
//! needs, when the window resets, and the most attempts that would fit now;
//! `callai serve` answers it as `budget_exceeded` (429).

mod ledger;
mod money;
mod quota;
mod room;
pub(crate) mod worst_case;

pub use ledger::{
    KeyClaim, KeyState, Ledger, Limits, ReserveRequest, Reserved, StoredAnswer, Window, WindowState,
};
pub use money::Money;
pub(crate) use money::{Charges, spend as request_spend};
pub(crate) use quota::QuotaHeld;
pub use quota::{ProviderQuota, Quotas, quota_exceeded};
pub use room::{WindowChange, adjustment, first_misfit, grant, signed, trimmed};

pub(crate) use worst_case::request_bound;
pub use worst_case::{
    Bounds, FALLBACK_BYTES_PER_TOKEN, MAX_COMPLAINT_BYTES, Rate, attempt_budgets, fitting_attempts,
    fitting_max_tokens, worst_case,
};

use crate::provider::BoxFuture;
use callai_wire::{CallError, ErrorCode};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The budget keys, in the order a refusal names the first a call does
/// not fit.
pub const KEYS: [&str; 4] = ["requests", "outputTokens", "inputTokens", "cost"];

/// Provider requests, tokens and money: what a call may spend, or spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Provider requests (attempts).
    pub requests: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Money, in billionths of the budget's currency
    /// ([`crate::cost::to_nanos`]); 0 unless the budget is in money.
    pub cost: u64,
}

impl Spend {
    /// The amounts in [`KEYS`]' order.
    pub fn amounts(&self) -> [u64; 4] {
        [
            self.requests,
            self.output_tokens,
            self.input_tokens,
            self.cost,
        ]
    }

    /// The spend of amounts in [`KEYS`]' order.
    pub fn from_amounts([requests, output_tokens, input_tokens, cost]: [u64; 4]) -> Self {
        Self {
            requests,
            output_tokens,
            input_tokens,
            cost,
        }
    }

    /// The amounts with their budget keys, in [`KEYS`]' order.
    pub fn by_key(&self) -> [(&'static str, u64); 4] {
        let amounts = self.amounts();
        std::array::from_fn(|i| (KEYS[i], amounts[i]))
    }

    /// Key by key, `self + other` (saturating).
    pub fn plus(self, other: Spend) -> Spend {
        self.zip(other, u64::saturating_add)
    }

    /// Key by key, `self - other` (saturating at 0).
    pub fn minus(self, other: Spend) -> Spend {
        self.zip(other, u64::saturating_sub)
    }

    /// Each key times `n` (saturating).
    pub fn times(self, n: u64) -> Spend {
        Self::from_amounts(self.amounts().map(|a| a.saturating_mul(n)))
    }

    /// Whether every key of `self` is at least `other`'s.
    pub fn covers(&self, other: &Spend) -> bool {
        self.amounts()
            .iter()
            .zip(other.amounts())
            .all(|(&a, b)| a >= b)
    }

    fn zip(self, other: Spend, f: impl Fn(u64, u64) -> u64) -> Spend {
        let (a, b) = (self.amounts(), other.amounts());
        Self::from_amounts(std::array::from_fn(|i| f(a[i], b[i])))
    }
}

/// An amount of `key` as a refusal or `GET /v1/budget` shows it: money in
/// its currency's units, read from its exact decimal (a whole amount a
/// whole number, `0.3` the number written `0.3`), the others as counted.
pub fn shown(key: &str, amount: u64) -> serde_json::Value {
    if key == "cost" {
        serde_json::from_str(&crate::cost::decimal(amount))
            .unwrap_or_else(|_| serde_json::Value::from(crate::cost::from_nanos(amount)))
    } else {
        serde_json::Value::from(amount)
    }
}

/// What a budget gave a call it admitted: its own handle, handed back when
/// the call settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The reservation's id in the budget's store.
    pub id: i64,
    /// The start of the window it was made in (ms since the Unix epoch; 0
    /// for a lifetime budget): the call is charged to this window even if
    /// another has begun since.
    pub window_ms: u64,
}

/// A budget's refusal of a call's worst case: the first key it does not
/// fit, and what is left of every key (for the engine to say how many
/// attempts would fit now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The budget key (one of [`KEYS`](KEYS)).
    pub key: &'static str,
    /// What is left of it.
    pub left: u64,
    /// What the call needs of it.
    pub needed: u64,
    /// What is left of each limited key.
    pub room: Limits,
    /// When the window ends and the budget is whole again (ms since the
    /// Unix epoch); `None` for a lifetime budget.
    pub resets_at_ms: Option<u64>,
    /// The limit of `key` per window.
    pub limit: u64,
    /// The window it counts over.
    pub per: Window,
}

/// What a refused call could ask for that would fit now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fits {
    /// The most attempts, at the call's own `maxTokens`
    /// ([`fitting_attempts`]).
    pub attempts: Option<u32>,
    /// The largest `maxTokens`, with the call's own attempts
    /// ([`fitting_max_tokens`]).
    pub max_tokens: Option<u32>,
}

impl Refusal {
    /// The call's error (see [`budget_exceeded`]), telling when the window
    /// resets and what would `fit` now: the most attempts, the largest
    /// `maxTokens`. `currency` is the budget's, for a refusal of its
    /// `cost`.
    pub fn into_error(self, fits: Fits, currency: Option<&str>) -> CallError {
        let mut advice = String::new();
        if let Some(n) = fits.attempts {
            let plural = if n == 1 { "" } else { "s" };
            advice.push_str(&format!(
                "; a call of at most {n} attempt{plural} fits now (retry.maxAttempts, or x-callai-max-attempts on the drop-ins)"
            ));
        }
        if let Some(n) = fits.max_tokens {
            let or = if fits.attempts.is_some() {
                ", or"
            } else {
                "; a call"
            };
            advice.push_str(&format!(
                "{or} of maxTokens at most {n} fits now (max_tokens on the drop-ins)"
            ));
        }
        let resets_at = self.resets_at_ms.map(rfc3339);
        if let Some(at) = &resets_at {
            let per = self.per.as_str();
            advice.push_str(&format!("; the budget's window ({per}) resets at {at}"));
        }
        let currency = currency.filter(|_| self.key == "cost");
        let mut e = budget_exceeded(self.key, self.left, self.needed, currency);
        e.message.push_str(&advice);
        if let Some(n) = fits.attempts {
            e = e.with_detail("fitsMaxAttempts", n);
        }
        if let Some(n) = fits.max_tokens {
            e = e.with_detail("fitsMaxTokens", n);
        }
        if let Some(at) = resets_at {
            e = e.with_detail("resetsAt", at);
        }
        e.with_detail("limit", shown(self.key, self.limit))
            .with_detail("per", self.per.as_str())
    }
}

/// `ms` since the Unix epoch as an RFC 3339 time, to the second (UTC).
fn rfc3339(ms: u64) -> String {
    let seconds = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    jiff::Timestamp::from_second(seconds)
        .map_or_else(|_| format!("{ms} ms after the epoch"), |t| t.to_string())
}

/// Why a reservation was not made.
#[derive(Debug, Clone, PartialEq)]
pub enum ReserveError {
    /// The call's worst case does not fit.
    Refused(Refusal),
    /// The budget could not be checked (its store failed): the call's
    /// error as is.
    Failed(CallError),
}

impl From<CallError> for ReserveError {
    fn from(e: CallError) -> Self {
        Self::Failed(e)
    }
}

/// Where a call's worst case is reserved and its real spend charged.
pub trait Budget: Send + Sync {
    /// Reserves `worst` for one call, or refuses it before any request is
    /// sent.
    fn reserve(&self, worst: Spend) -> BoxFuture<'_, Result<Reservation, ReserveError>>;

    /// Charges `spent` against `reservation` and releases the rest. It runs
    /// to its end even when the call was dropped (the future is spawned),
    /// so it must own what it needs.
    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()>;

    /// An attempt to `provider` reported more than it was asked for: `over`
    /// beyond its `maxTokens` and its input's bound (with the provider's
    /// `inputOverheadTokens`). It is charged what it reported; this says
    /// so, for the operator (a counter, a log line). With a correct
    /// configuration it never happens.
    fn overrun(&self, provider: &str, over: Spend) {
        let _ = (provider, over);
    }

    /// What it charges in money, when it limits `cost`: every attempt is
    /// then priced at its target's price in its currency, and a call that
    /// may reach a target with no such price is refused. `None` (the
    /// default): the budget counts requests and tokens only.
    fn money(&self) -> Option<&Money> {
        None
    }
}

/// A budget shared by the calls it governs.
pub type SharedBudget = Arc<dyn Budget>;

impl std::fmt::Debug for dyn Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Budget")
    }
}

/// The refusal of a call that does not fit: `policy_denied`, with
/// `details.reason = "budget_exceeded"`, `budget` (the key), `left` and
/// `needed` (money in units of `currency`, which is named too).
pub fn budget_exceeded(key: &str, left: u64, needed: u64, currency: Option<&str>) -> CallError {
    let (left, needed) = (shown(key, left), shown(key, needed));
    let unit = currency.map_or_else(String::new, |c| format!(" {c}"));
    let e = CallError::new(
        ErrorCode::PolicyDenied,
        format!("budget {key}: the call needs up to {needed}{unit}, {left}{unit} is left"),
    )
    .with_detail("reason", "budget_exceeded")
    .with_detail("budget", key)
    .with_detail("left", left)
    .with_detail("needed", needed);
    match currency {
        Some(c) => e.with_detail("currency", c),
        None => e,
    }
}

/// What a call's attempts have spent so far, updated as they go: a request
/// counts at its worst (its `maxTokens`, its text in bytes, priced at its
/// target's price) from when it is sent until its usage comes back, so a
/// call dropped mid-request is charged what the provider may bill for it.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    amounts: [AtomicU64; 4],
}

impl Tally {
    /// A request goes out that may spend `worst`.
    pub(crate) fn sent(&self, worst: &Spend) {
        for (total, amount) in self.amounts.iter().zip(worst.amounts()) {
            total.fetch_add(amount, Ordering::Relaxed);
        }
    }

    /// Its usage came back: `real` (where a count was not reported, the
    /// worst case stands in it) replaces `worst`. What it reported beyond
    /// the worst case (a provider billing past its `max_tokens`, or hidden
    /// input past the configured overhead) is charged too, and returned.
    pub(crate) fn reported(&self, worst: &Spend, real: &Spend) -> Spend {
        for ((total, worst), real) in self.amounts.iter().zip(worst.amounts()).zip(real.amounts()) {
            total.fetch_add(real, Ordering::Relaxed);
            total.fetch_sub(worst, Ordering::Relaxed);
        }
        real.minus(*worst)
    }

    /// It never reached the provider: not an attempt, nothing to charge.
    pub(crate) fn unsent(&self, worst: &Spend) {
        for (total, amount) in self.amounts.iter().zip(worst.amounts()) {
            total.fetch_sub(amount, Ordering::Relaxed);
        }
    }

    /// The spend so far.
    pub(crate) fn spent(&self) -> Spend {
        Spend::from_amounts(std::array::from_fn(|i| {
            self.amounts[i].load(Ordering::Relaxed)
        }))
    }
}

/// A reservation held for a call: settled with the tally when the call
/// ends, or, when the call is dropped first (its client went away, its run
/// was stopped), settled with what the tally says by then.
pub(crate) struct Held {
    pub(crate) budget: SharedBudget,
    reservation: Option<Reservation>,
    pub(crate) tally: Arc<Tally>,
    /// What its attempts cost at each target, for a budget in money.
    pub(crate) charges: Charges,
}

impl Held {
    /// Reserves `worst` on `budget`, its attempts to be charged at
    /// `charges`.
    pub(crate) async fn reserve(
        budget: &SharedBudget,
        worst: Spend,
        charges: Charges,
    ) -> Result<Self, ReserveError> {
        let reservation = budget.reserve(worst).await?;
        Ok(Self {
            budget: budget.clone(),
            reservation: Some(reservation),
            tally: Arc::new(Tally::default()),
            charges,
        })
    }

    /// The call ended: charges what it spent.
    pub(crate) async fn settle(mut self) {
        if let Some(reservation) = self.reservation.take() {
            self.budget.settle(reservation, self.tally.spent()).await;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(reservation) = self.reservation.take() else {
            return;
        };
        let settle = self.budget.settle(reservation, self.tally.spent());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(settle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(requests: u64, output_tokens: u64, input_tokens: u64, cost: u64) -> Spend {
        Spend {
            requests,
            output_tokens,
            input_tokens,
            cost,
        }
    }

    #[test]
    fn the_tally_counts_a_request_at_its_worst_until_its_usage_returns() {
        let t = Tally::default();
        let first = spend(1, 2000, 300, 900);
        t.sent(&first);
        assert_eq!(t.spent(), first);
        assert_eq!(
            t.reported(&first, &spend(1, 1500, 120, 400)),
            Spend::default()
        );
        let second = spend(1, 4000, 310, 1000);
        t.sent(&second);
        t.reported(&second, &second);
        t.sent(&second);
        t.unsent(&second);
        assert_eq!(t.spent(), spend(2, 5500, 430, 1400));
    }

    #[test]
    fn what_a_provider_reports_past_its_worst_case_is_charged_and_returned() {
        let t = Tally::default();
        let worst = spend(1, 100, 50, 10);
        t.sent(&worst);
        let over = t.reported(&worst, &spend(1, 130, 80, 14));
        assert_eq!(over, spend(0, 30, 30, 4));
        assert_eq!(t.spent(), spend(1, 130, 80, 14));
    }

    #[test]
    fn spends_add_subtract_and_compare_key_by_key() {
        let a = spend(3, 10, 20, 30);
        assert_eq!(a.plus(spend(1, 1, 1, 1)), spend(4, 11, 21, 31));
        assert_eq!(a.minus(spend(5, 1, 1, 40)), spend(0, 9, 19, 0));
        assert_eq!(a.times(2), spend(6, 20, 40, 60));
        assert!(a.covers(&spend(3, 10, 0, 30)));
        assert!(!a.covers(&spend(0, 0, 0, 31)), "money counts too");
        assert_eq!(a.by_key()[3], ("cost", 30));
    }

    #[test]
    fn a_refusal_of_money_names_amounts_in_the_budgets_currency() {
        let e = budget_exceeded("cost", 250_000_000, 1_500_000_000, Some("USD"));
        assert_eq!(
            e.message,
            "budget cost: the call needs up to 1.5 USD, 0.25 USD is left"
        );
        let d = e.details.unwrap();
        assert_eq!(
            (d["left"].as_f64(), d["needed"].as_f64()),
            (Some(0.25), Some(1.5))
        );
        assert_eq!(d["currency"], "USD");
    }

    #[test]
    fn a_refusal_names_the_key_what_is_left_and_what_is_needed() {
        let e = budget_exceeded("outputTokens", 100, 14000, None);
        assert_eq!(e.code, ErrorCode::PolicyDenied);
        let d = e.details.unwrap();
        assert_eq!(d["reason"], "budget_exceeded");
        assert_eq!(d["budget"], "outputTokens");
        assert_eq!(
            (d["left"].as_u64(), d["needed"].as_u64()),
            (Some(100), Some(14000))
        );
    }
}

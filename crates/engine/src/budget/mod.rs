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
mod room;
pub(crate) mod worst_case;

pub use ledger::{
    KeyClaim, KeyState, Ledger, Limits, ReserveRequest, Reserved, StoredAnswer, Window, WindowState,
};
pub use room::{WindowChange, adjustment, first_misfit, grant, signed, trimmed};

pub(crate) use worst_case::request_bound;
pub use worst_case::{
    FALLBACK_BYTES_PER_TOKEN, MAX_COMPLAINT_BYTES, attempt_budgets, fitting_attempts, worst_case,
};

use crate::provider::BoxFuture;
use callai_wire::{CallError, ErrorCode};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Provider requests and tokens: what a call may spend, or spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Provider requests (attempts).
    pub requests: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens.
    pub input_tokens: u64,
}

impl Spend {
    /// The three amounts with their budget keys, in the order a refusal
    /// names the first that does not fit.
    pub fn by_key(&self) -> [(&'static str, u64); 3] {
        [
            ("requests", self.requests),
            ("outputTokens", self.output_tokens),
            ("inputTokens", self.input_tokens),
        ]
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
    /// The budget key (`requests`, `outputTokens`, `inputTokens`).
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
}

impl Refusal {
    /// The call's error (see [`budget_exceeded`]), telling when the window
    /// resets and `fits`, the most attempts that would fit now.
    pub fn into_error(self, fits: Option<u32>) -> CallError {
        let mut advice = String::new();
        if let Some(n) = fits {
            let plural = if n == 1 { "" } else { "s" };
            advice.push_str(&format!(
                "; a call of at most {n} attempt{plural} fits now (retry.maxAttempts, or x-callai-max-attempts on the drop-ins)"
            ));
        }
        let resets_at = self.resets_at_ms.map(rfc3339);
        if let Some(at) = &resets_at {
            advice.push_str(&format!("; the budget's window resets at {at}"));
        }
        let mut e = budget_exceeded(self.key, self.left, self.needed);
        e.message.push_str(&advice);
        if let Some(n) = fits {
            e = e.with_detail("fitsMaxAttempts", n);
        }
        if let Some(at) = resets_at {
            e = e.with_detail("resetsAt", at);
        }
        e
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
/// `needed`.
pub fn budget_exceeded(key: &str, left: u64, needed: u64) -> CallError {
    CallError::new(
        ErrorCode::PolicyDenied,
        format!("budget {key}: the call needs up to {needed}, {left} is left"),
    )
    .with_detail("reason", "budget_exceeded")
    .with_detail("budget", key)
    .with_detail("left", left)
    .with_detail("needed", needed)
}

/// What a call's attempts have spent so far, updated as they go: a request
/// counts at its worst (its `maxTokens`, its text in bytes) from when it is
/// sent until its usage comes back, so a call dropped mid-request is
/// charged what the provider may bill for it.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: AtomicU64,
    output: AtomicU64,
    input: AtomicU64,
}

impl Tally {
    /// A request goes out with `max_tokens` and `input_bound` bytes.
    pub(crate) fn sent(&self, max_tokens: u32, input_bound: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.output
            .fetch_add(u64::from(max_tokens), Ordering::Relaxed);
        self.input.fetch_add(input_bound, Ordering::Relaxed);
    }

    /// Its usage came back: what it reported replaces the worst case (an
    /// amount it did not report stays charged at the worst). What it
    /// reported beyond the worst case (a provider billing past its
    /// `max_tokens`, or hidden input past the configured overhead) is
    /// charged too, and returned.
    pub(crate) fn reported(
        &self,
        max_tokens: u32,
        input_bound: u64,
        input: Option<u32>,
        output: Option<u32>,
    ) -> Spend {
        let mut over = Spend::default();
        if let Some(output) = output {
            self.output.fetch_add(u64::from(output), Ordering::Relaxed);
            self.output
                .fetch_sub(u64::from(max_tokens), Ordering::Relaxed);
            over.output_tokens = u64::from(output).saturating_sub(u64::from(max_tokens));
        }
        if let Some(input) = input {
            self.input.fetch_add(u64::from(input), Ordering::Relaxed);
            self.input.fetch_sub(input_bound, Ordering::Relaxed);
            over.input_tokens = u64::from(input).saturating_sub(input_bound);
        }
        over
    }

    /// It never reached the provider: not an attempt, nothing to charge.
    pub(crate) fn unsent(&self, max_tokens: u32, input_bound: u64) {
        self.requests.fetch_sub(1, Ordering::Relaxed);
        self.output
            .fetch_sub(u64::from(max_tokens), Ordering::Relaxed);
        self.input.fetch_sub(input_bound, Ordering::Relaxed);
    }

    /// The spend so far.
    pub(crate) fn spent(&self) -> Spend {
        Spend {
            requests: self.requests.load(Ordering::Relaxed),
            output_tokens: self.output.load(Ordering::Relaxed),
            input_tokens: self.input.load(Ordering::Relaxed),
        }
    }
}

/// A reservation held for a call: settled with the tally when the call
/// ends, or, when the call is dropped first (its client went away, its run
/// was stopped), settled with what the tally says by then.
pub(crate) struct Held {
    pub(crate) budget: SharedBudget,
    reservation: Option<Reservation>,
    pub(crate) tally: Arc<Tally>,
}

impl Held {
    /// Reserves `worst` on `budget`.
    pub(crate) async fn reserve(budget: &SharedBudget, worst: Spend) -> Result<Self, ReserveError> {
        let reservation = budget.reserve(worst).await?;
        Ok(Self {
            budget: budget.clone(),
            reservation: Some(reservation),
            tally: Arc::new(Tally::default()),
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

    #[test]
    fn the_tally_counts_a_request_at_its_worst_until_its_usage_returns() {
        let t = Tally::default();
        t.sent(2000, 300);
        assert_eq!(
            t.spent(),
            Spend {
                requests: 1,
                output_tokens: 2000,
                input_tokens: 300
            }
        );
        assert_eq!(
            t.reported(2000, 300, Some(120), Some(1500)),
            Spend::default()
        );
        t.sent(4000, 310);
        t.reported(4000, 310, None, None);
        t.sent(4000, 310);
        t.unsent(4000, 310);
        assert_eq!(
            t.spent(),
            Spend {
                requests: 2,
                output_tokens: 5500,
                input_tokens: 430
            }
        );
    }

    #[test]
    fn what_a_provider_reports_past_its_worst_case_is_charged_and_returned() {
        let t = Tally::default();
        t.sent(100, 50);
        let over = t.reported(100, 50, Some(80), Some(130));
        assert_eq!(
            over,
            Spend {
                requests: 0,
                output_tokens: 30,
                input_tokens: 30
            }
        );
        assert_eq!(
            t.spent(),
            Spend {
                requests: 1,
                output_tokens: 130,
                input_tokens: 80
            }
        );
    }

    #[test]
    fn a_refusal_names_the_key_what_is_left_and_what_is_needed() {
        let e = budget_exceeded("outputTokens", 100, 14000);
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

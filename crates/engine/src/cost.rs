//! Cost in money, one rule for every place that prices a request: a call
//! trace, a span, a budget in money. A request is priced at its own
//! provider's and model's [`TokenPrice`]; a count it did not report is
//! priced at its worst case (its `maxTokens`, its input's bound) and the
//! cost marked incomplete; a call's cost is its requests' [`CostSum`].
//!
//! Where prices come from (a provider's `prices`, a price list) is the
//! embedder's business: it hands the engine a [`PriceBook`].

use crate::engine::Target;
use crate::provider::ProviderReply;
use serde::Serialize;
use smallvec::SmallVec;
use std::sync::Arc;

/// What one provider model's tokens cost, per token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenPrice {
    /// Per input token not read from the cache.
    pub input: f64,
    /// Per input token read from the provider's prompt cache.
    pub cached_input: f64,
    /// Per output token.
    pub output: f64,
    /// The currency of all three (`USD`).
    pub currency: Arc<str>,
}

/// The tokens a request reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub input: Option<u32>,
    /// Of them, read from the provider's prompt cache.
    pub cached: Option<u32>,
    /// Output tokens.
    pub output: Option<u32>,
}

impl From<&ProviderReply> for Usage {
    fn from(reply: &ProviderReply) -> Self {
        Self {
            input: reply.input_tokens,
            cached: reply.cached_input_tokens,
            output: reply.output_tokens,
        }
    }
}

/// A cost: an amount, its currency, and whether every request it sums
/// reported its usage and had a price (else part of it is a worst case).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// Its currency (`USD`).
    pub currency: Arc<str>,
    /// False when a request reported no usage, or had no price.
    pub complete: bool,
}

impl TokenPrice {
    /// What a request cost: its reported tokens, or, missing a count, its
    /// worst case (`input_bound` input tokens, `max_tokens` output),
    /// marked incomplete.
    pub fn cost(&self, usage: Usage, input_bound: u64, max_tokens: u32) -> Cost {
        let tokens_in = usage.input.map_or(input_bound as f64, f64::from);
        let cached = f64::from(usage.cached.unwrap_or(0)).min(tokens_in);
        let tokens_out = f64::from(usage.output.unwrap_or(max_tokens));
        Cost {
            amount: (tokens_in - cached) * self.input
                + cached * self.cached_input
                + tokens_out * self.output,
            currency: self.currency.clone(),
            complete: usage.input.is_some() && usage.output.is_some(),
        }
    }

    /// The most an input token may cost: cached or not, whichever is
    /// dearer (a price list may say either).
    pub fn dearest_input(&self) -> f64 {
        self.input.max(self.cached_input)
    }
}

/// Where a host's prices are looked up.
pub trait PriceBook: Send + Sync + std::fmt::Debug {
    /// The price of a request to `model` of `provider`; `None` when the
    /// host knows none.
    fn price(&self, provider: &str, model: &str) -> Option<&TokenPrice>;
}

/// The prices of one call's targets, parallel to its chain, looked up once
/// as the call starts: each request the call sends is priced from them
/// once, for the call's watchers and its budget alike. Empty when the host
/// has no prices.
#[derive(Debug, Default)]
pub(crate) struct TargetPrices(SmallVec<[Option<TokenPrice>; 1]>);

impl TargetPrices {
    /// `targets`' prices in `book`.
    pub(crate) fn of(book: Option<&dyn PriceBook>, targets: &[Target<'_>]) -> Self {
        let Some(book) = book else {
            return Self::default();
        };
        Self(
            targets
                .iter()
                .map(|t| book.price(t.provider, &t.model).cloned())
                .collect(),
        )
    }

    /// The price of the chain's `target`th target, when it has one.
    pub(crate) fn get(&self, target: usize) -> Option<&TokenPrice> {
        self.0.get(target)?.as_ref()
    }

    /// What a request to `target` cost, reporting `usage` (a count it did
    /// not report at its worst: `input_bound`, `max_tokens`); `None`
    /// without a price.
    pub(crate) fn cost(
        &self,
        target: usize,
        usage: Usage,
        input_bound: u64,
        max_tokens: u32,
    ) -> Option<Cost> {
        Some(self.get(target)?.cost(usage, input_bound, max_tokens))
    }
}

/// A call's requests' costs, summed as they end: in one currency;
/// incomplete when a request had no price or was priced at its worst case;
/// no total at all when they were priced in more than one currency (an
/// amount in one of them would read as the call's bill).
#[derive(Debug, Default)]
pub struct CostSum {
    sum: Option<Cost>,
    /// A request had no price.
    unpriced: bool,
    /// Requests were priced in more than one currency.
    mixed: bool,
}

impl CostSum {
    /// Adds a request's cost (`None`: it had no price).
    pub fn add(&mut self, cost: Option<&Cost>) {
        match (cost, &mut self.sum) {
            (None, _) => self.unpriced = true,
            (Some(c), None) => self.sum = Some(c.clone()),
            (Some(c), Some(sum)) if sum.currency == c.currency => {
                sum.amount += c.amount;
                sum.complete &= c.complete;
            }
            (Some(_), Some(_)) => self.mixed = true,
        }
    }

    /// The call's cost.
    pub fn total(&self) -> Option<Cost> {
        let mut sum = self.sum.clone().filter(|_| !self.mixed)?;
        sum.complete &= !self.unpriced;
        Some(sum)
    }
}

/// Billionths of a currency's unit per unit: a budget in money counts in
/// them, so that its ledger adds integers as it does tokens (an amount of
/// 18 billion units fits).
pub const NANOS_PER_UNIT: f64 = 1e9;

/// `amount` in billionths, rounded up: a budget is never charged less than
/// a cost.
pub fn to_nanos(amount: f64) -> u64 {
    // An amount past counting (an overflow to infinity, or its NaN) is the
    // most there is, never nothing: a budget refuses it, it does not pass.
    if amount.is_nan() || amount * NANOS_PER_UNIT >= u64::MAX as f64 {
        return u64::MAX;
    }
    if amount <= 0.0 {
        return 0;
    }
    let nanos = amount * NANOS_PER_UNIT;
    // Up, but not past a whole number the product missed by a rounding
    // error (1.5e-7 * 1e9 is 150.00000000000003); `as` saturates at
    // u64::MAX for amounts too large to count.
    (nanos - nanos * 1e-12).ceil() as u64
}

/// Billionths as an amount, for people to read.
pub fn from_nanos(nanos: u64) -> f64 {
    nanos as f64 / NANOS_PER_UNIT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(amount: f64, complete: bool) -> Cost {
        Cost {
            amount,
            currency: "USD".into(),
            complete,
        }
    }

    #[test]
    fn a_request_without_usage_is_priced_at_its_worst_case_and_incomplete() {
        let price = TokenPrice {
            input: 2.0e-6,
            cached_input: 0.5e-6,
            output: 10.0e-6,
            currency: "USD".into(),
        };
        let usage = |input, cached, output| Usage {
            input,
            cached,
            output,
        };
        let reported = price.cost(usage(Some(1000), None, Some(100)), 5000, 400);
        assert!((reported.amount - 0.003).abs() < 1e-12, "{reported:?}");
        assert!(reported.complete);
        // 800 of the 1000 from the cache, at a quarter of the price.
        let cached = price.cost(usage(Some(1000), Some(800), Some(100)), 5000, 400);
        assert!((cached.amount - (200.0 * 2e-6 + 800.0 * 0.5e-6 + 0.001)).abs() < 1e-12);
        let worst = price.cost(usage(None, None, None), 5000, 400);
        assert!((worst.amount - 0.014).abs() < 1e-12, "{worst:?}");
        assert!(!worst.complete);
    }

    #[test]
    fn a_call_sums_its_requests_and_is_incomplete_when_one_lacks_a_price() {
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(Some(&usd(0.25, true)));
        assert_eq!(sum.total(), Some(usd(0.75, true)));
        sum.add(Some(&usd(0.25, false)));
        assert_eq!(sum.total(), Some(usd(1.0, false)), "a worst case in it");
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(None);
        assert_eq!(sum.total(), Some(usd(0.5, false)));
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(Some(&Cost {
            currency: "EUR".into(),
            ..usd(1.0, true)
        }));
        assert_eq!(sum.total(), None, "no total across currencies");
        assert_eq!(CostSum::default().total(), None);
    }

    #[test]
    fn nanos_round_up_and_read_back() {
        assert_eq!(to_nanos(5.0), 5_000_000_000);
        assert_eq!(to_nanos(1.5e-7), 150);
        assert_eq!(to_nanos(1e-10), 1, "never charged less than a cost");
        assert_eq!(to_nanos(0.0), 0);
        assert_eq!(to_nanos(-1.0), 0);
        assert_eq!(to_nanos(f64::NAN), u64::MAX, "an overflow is not free");
        assert_eq!(to_nanos(f64::INFINITY), u64::MAX);
        assert_eq!(to_nanos(1e30), u64::MAX);
        assert!((from_nanos(2_500_000_000) - 2.5).abs() < 1e-12);
    }
}

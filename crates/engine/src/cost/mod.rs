//! Cost in money, one rule for every place that prices a request: a call
//! trace, a span, a budget in money. A request is priced at its own
//! provider's and model's [`TokenPrice`]; a count it did not report is
//! priced at its worst case (its `maxTokens`, its input's bound) and the
//! cost marked incomplete, while a request its provider refused with an
//! error status before any output costs nothing; a call's cost is its
//! requests' [`CostSum`]. Every amount is an exact decimal ([`decimal`]).
//!
//! Where prices come from (a provider's `prices`, a price list) is the
//! embedder's business: it hands the engine a [`PriceBook`].

mod decimal;

pub use decimal::{
    NANOS_PER_UNIT, PerToken, decimal, femtos_to_nanos, from_nanos, serialize_decimal, to_nanos,
};

use crate::engine::Target;
use crate::provider::{ProviderFailure, ProviderReply};
use serde::Serialize;
use smallvec::SmallVec;
use std::sync::Arc;

/// What one provider model's tokens cost, per token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenPrice {
    /// Per input token neither read from nor written to the cache.
    pub input: PerToken,
    /// Per input token read from the provider's prompt cache.
    pub cached_input: PerToken,
    /// Per input token written to the provider's prompt cache (Anthropic's
    /// cache creation).
    pub cache_write: PerToken,
    /// Per output token (reasoning and thinking tokens included).
    pub output: PerToken,
    /// The currency of all four (`USD`).
    pub currency: Arc<str>,
}

/// The tokens a request reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens, cached and cache-written ones included.
    pub input: Option<u32>,
    /// Of them, read from the provider's prompt cache.
    pub cached: Option<u32>,
    /// Of them, written to the provider's prompt cache.
    pub written: Option<u32>,
    /// Output tokens.
    pub output: Option<u32>,
}

impl From<&ProviderReply> for Usage {
    fn from(reply: &ProviderReply) -> Self {
        Self {
            input: reply.input_tokens,
            cached: reply.cached_input_tokens,
            written: reply.cache_write_input_tokens,
            output: reply.output_tokens,
        }
    }
}

impl Usage {
    /// What a request that failed is billed at: nothing at all when its
    /// provider answered with an error status (a 503, a 429, a 400 before
    /// any output: no provider bills those), else `None` (a timeout, a
    /// reset, an answer cut after output began: its worst case).
    pub fn billed_for_failure(failure: &ProviderFailure) -> Option<Self> {
        failure
            .status
            .is_some_and(|s| !(200..300).contains(&s))
            .then_some(Self {
                input: Some(0),
                cached: Some(0),
                written: Some(0),
                output: Some(0),
            })
    }
}

/// A cost: an amount, its currency, and whether every request it sums
/// reported its usage and had a price (else part of it is a worst case).
/// Shown as `{"amount": 0.0025023, "currency": "USD", "complete": true}`,
/// the amount a JSON number of its exact decimal digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// The amount, in billionths of the currency's unit.
    #[serde(rename = "amount", serialize_with = "serialize_decimal")]
    pub nanos: u64,
    /// Its currency (`USD`).
    pub currency: Arc<str>,
    /// False when a request reported no usage, or had no price.
    pub complete: bool,
}

impl Cost {
    /// The amount as its exact decimal (`0.0025023`).
    pub fn decimal(&self) -> String {
        decimal(self.nanos)
    }

    /// The amount as a float, for a metric or a span attribute.
    pub fn amount(&self) -> f64 {
        from_nanos(self.nanos)
    }
}

impl TokenPrice {
    /// What a request cost: its reported tokens, or, missing a count, its
    /// worst case (`input_bound` input tokens, `max_tokens` output),
    /// marked incomplete. Exact, rounded up to a billionth.
    pub fn cost(&self, usage: Usage, input_bound: u64, max_tokens: u32) -> Cost {
        let tokens_in = usage.input.map_or(input_bound, u64::from);
        let cached = u64::from(usage.cached.unwrap_or(0)).min(tokens_in);
        let written = u64::from(usage.written.unwrap_or(0)).min(tokens_in - cached);
        let plain = tokens_in - cached - written;
        let tokens_out = u64::from(usage.output.unwrap_or(max_tokens));
        let femtos = self.input.of(plain)
            + self.cached_input.of(cached)
            + self.cache_write.of(written)
            + self.output.of(tokens_out);
        Cost {
            nanos: femtos_to_nanos(femtos),
            currency: self.currency.clone(),
            complete: usage.input.is_some() && usage.output.is_some(),
        }
    }

    /// The most an input token may cost: cached, written or neither,
    /// whichever is dearest (a price list may say any).
    pub fn dearest_input(&self) -> PerToken {
        self.input.max(self.cached_input).max(self.cache_write)
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
                sum.nanos = sum.nanos.saturating_add(c.nanos);
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

/// Why `code` is not a currency code as prices and budgets spell one (three
/// capital letters, ISO 4217's form: `USD`, `EUR`); none when it is.
/// Currencies are compared as written, so a `usd` budget would find no
/// `USD` price and refuse every call: it is refused where it is written.
pub fn currency_code_problem(code: &str) -> Option<String> {
    let fine = code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase());
    (!fine).then(|| {
        format!("must be a three-letter ISO 4217 code in capitals (USD, EUR), got {code:?}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::FailureKind;

    fn usd(nanos: u64, complete: bool) -> Cost {
        Cost {
            nanos,
            currency: "USD".into(),
            complete,
        }
    }

    fn price() -> TokenPrice {
        TokenPrice {
            input: PerToken::per_million(2.0),
            cached_input: PerToken::per_million(0.5),
            cache_write: PerToken::per_million(2.5),
            output: PerToken::per_million(10.0),
            currency: "USD".into(),
        }
    }

    fn usage(input: Option<u32>, cached: Option<u32>, output: Option<u32>) -> Usage {
        Usage {
            input,
            cached,
            written: None,
            output,
        }
    }

    #[test]
    fn a_request_without_usage_is_priced_at_its_worst_case_and_incomplete() {
        let price = price();
        let reported = price.cost(usage(Some(1000), None, Some(100)), 5000, 400);
        assert_eq!(reported, usd(3_000_000, true));
        // 800 of the 1000 from the cache, at a quarter of the price.
        let cached = price.cost(usage(Some(1000), Some(800), Some(100)), 5000, 400);
        assert_eq!(cached.nanos, 200 * 2000 + 800 * 500 + 1_000_000);
        // 300 written to the cache, at its own price.
        let written = price.cost(
            Usage {
                written: Some(300),
                ..usage(Some(1000), Some(600), Some(0))
            },
            5000,
            400,
        );
        assert_eq!(written.nanos, 100 * 2000 + 600 * 500 + 300 * 2500);
        let worst = price.cost(usage(None, None, None), 5000, 400);
        assert_eq!(worst, usd(14_000_000, false));
    }

    #[test]
    fn a_price_of_a_fraction_of_a_billionth_per_token_is_summed_exactly_then_rounded_up() {
        let price = TokenPrice {
            input: PerToken::per_million(0.01875),
            ..price()
        };
        // 11 tokens at 18.75 billionths: 206.25, charged 207.
        let cost = price.cost(usage(Some(11), None, Some(0)), 0, 0);
        assert_eq!(cost.nanos, 207);
        assert_eq!(cost.decimal(), "0.000000207");
    }

    #[test]
    fn a_refusal_with_an_error_status_is_billed_nothing_a_cut_answer_its_worst() {
        for status in [400, 429, 503] {
            let failure = ProviderFailure::from_status(status, "no");
            let billed = Usage::billed_for_failure(&failure).expect("billed nothing");
            assert_eq!(price().cost(billed, 5000, 400), usd(0, true));
        }
        let timeout = ProviderFailure::new(FailureKind::Transient, None, "timed out");
        assert_eq!(Usage::billed_for_failure(&timeout), None);
        let cut = ProviderFailure::new(FailureKind::Interrupted, None, "cut").at(200);
        assert_eq!(
            Usage::billed_for_failure(&cut),
            None,
            "a 200 cut after output"
        );
    }

    #[test]
    fn a_call_sums_its_requests_and_is_incomplete_when_one_lacks_a_price() {
        let mut sum = CostSum::default();
        sum.add(Some(&usd(500, true)));
        sum.add(Some(&usd(250, true)));
        assert_eq!(sum.total(), Some(usd(750, true)));
        sum.add(Some(&usd(250, false)));
        assert_eq!(sum.total(), Some(usd(1000, false)), "a worst case in it");
        let mut sum = CostSum::default();
        sum.add(Some(&usd(500, true)));
        sum.add(None);
        assert_eq!(sum.total(), Some(usd(500, false)));
        let mut sum = CostSum::default();
        sum.add(Some(&usd(500, true)));
        sum.add(Some(&Cost {
            currency: "EUR".into(),
            ..usd(1000, true)
        }));
        assert_eq!(sum.total(), None, "no total across currencies");
        assert_eq!(CostSum::default().total(), None);
    }

    #[test]
    fn a_sum_of_many_requests_keeps_its_digits() {
        // What a float summed to 0.0025022999999999994.
        let mut sum = CostSum::default();
        for nanos in [78_000, 2_454_000, 54_000, 316_300] {
            sum.add(Some(&usd(nanos, true)));
        }
        let total = sum.total().unwrap();
        assert_eq!(total.decimal(), "0.0029023");
        let json = serde_json::to_string(&total).unwrap();
        assert_eq!(
            json,
            r#"{"amount":0.0029023,"currency":"USD","complete":true}"#
        );
    }
}

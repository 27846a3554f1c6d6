//! A budget in money: each attempt of a budgeted call is charged at its own
//! target's price in the budget's currency (the host's prices,
//! [`crate::HostBuilder::prices`]), and the call's worst case is reserved
//! at the dearest price among the targets it may reach. A target with no
//! price in that currency cannot be bounded, so a call that may reach one
//! is refused before any request.

use super::Spend;
use super::worst_case::Rate;
use crate::cost::{Cost, TargetPrices, TokenPrice, Usage};
use crate::engine::Target;
use callai_wire::{CallError, ErrorCode};
use std::sync::Arc;

/// What a budget in money counts in; its calls are charged at the host's
/// prices.
#[derive(Debug, Clone)]
pub struct Money {
    /// The budget's currency: every target a call may reach needs a price
    /// in it.
    pub currency: Arc<str>,
}

/// The prices of one budgeted call's targets, parallel to its chain; none
/// for a budget not in money.
#[derive(Debug, Default)]
pub(crate) struct Charges {
    prices: Vec<TokenPrice>,
}

impl Charges {
    /// `targets`' prices (`prices`, parallel to them) in `money`'s
    /// currency, or the refusal naming the first target that has none.
    pub(crate) fn of(
        money: &Money,
        prices: &TargetPrices,
        targets: &[Target<'_>],
    ) -> Result<Self, CallError> {
        let prices = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                prices
                    .get(i)
                    .filter(|p| p.currency == money.currency)
                    .cloned()
                    .ok_or_else(|| unpriced(money, t))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { prices })
    }

    /// The dearest input and output prices among the targets.
    pub(crate) fn rate(&self) -> Rate {
        self.prices.iter().fold(Rate::default(), |rate, p| Rate {
            input: rate.input.max(p.dearest_input()),
            output: rate.output.max(p.output),
        })
    }

    /// What one request to `target` may spend at most: one request,
    /// `max_tokens` out, `input_bound` in, and their price.
    pub(crate) fn worst(&self, target: usize, max_tokens: u32, input_bound: u64) -> Spend {
        let cost = self
            .prices
            .get(target)
            .map(|p| p.cost(Usage::default(), input_bound, max_tokens).nanos);
        spend(Usage::default(), max_tokens, input_bound, cost)
    }

    /// What a request spent, having reported `usage` (a count it did not
    /// report stays at its worst) and cost `cost`: the price the request
    /// was priced at once as it ended ([`TargetPrices::cost`]), which for
    /// a budget in money is the target's price in its currency.
    pub(crate) fn spent(
        &self,
        usage: Usage,
        max_tokens: u32,
        input_bound: u64,
        cost: Option<&Cost>,
    ) -> Spend {
        let in_money = !self.prices.is_empty();
        debug_assert!(
            !in_money || cost.is_some(),
            "a target of a call in money is priced"
        );
        let cost = cost.filter(|_| in_money).map(|c| c.nanos);
        spend(usage, max_tokens, input_bound, cost)
    }
}

/// One request's spend: its tokens (a count not reported at its worst) and,
/// in a budget in money, its cost in billionths.
pub(crate) fn spend(usage: Usage, max_tokens: u32, input_bound: u64, cost: Option<u64>) -> Spend {
    Spend {
        requests: 1,
        output_tokens: usage.output.map_or(u64::from(max_tokens), u64::from),
        input_tokens: usage.input.map_or(input_bound, u64::from),
        cost: cost.unwrap_or(0),
    }
}

/// The refusal of a call that may reach `target`, which has no price in
/// the budget's currency: `policy_denied` with `details.reason =
/// "budget_unpriced"`, before any request.
fn unpriced(money: &Money, target: &Target<'_>) -> CallError {
    let (provider, model, currency) = (target.provider, &target.model, &money.currency);
    CallError::new(
        ErrorCode::PolicyDenied,
        format!(
            "the budget is in {currency} and provider {provider:?} model {model:?} has no price in \
             {currency} ([providers.{provider}.prices] or the [pricing] file): a call that may \
             reach it cannot be held to the budget"
        ),
    )
    .with_detail("reason", "budget_unpriced")
    .with_detail("provider", provider)
    .with_detail("model", model.as_str())
    .with_detail("currency", &**currency)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{PerToken, PriceBook};

    #[derive(Debug)]
    struct Book(Vec<(&'static str, TokenPrice)>);

    impl PriceBook for Book {
        fn price(&self, provider: &str, _model: &str) -> Option<&TokenPrice> {
            self.0.iter().find(|(p, _)| *p == provider).map(|(_, t)| t)
        }
    }

    /// A price of these amounts per million tokens.
    fn price(input: f64, cached_input: f64, output: f64, currency: &str) -> TokenPrice {
        TokenPrice {
            input: PerToken::per_million(input),
            cached_input: PerToken::per_million(cached_input),
            cache_write: PerToken::per_million(input),
            output: PerToken::per_million(output),
            currency: currency.into(),
        }
    }

    fn target(provider: &str) -> Target<'_> {
        Target {
            provider,
            model: "m".into(),
            native: true,
        }
    }

    fn money() -> Money {
        Money {
            currency: "USD".into(),
        }
    }

    /// `targets` and their prices in the host's book.
    fn priced<'a>(targets: &[&'a str]) -> (Vec<Target<'a>>, TargetPrices) {
        let book = Book(vec![
            ("cheap", price(1.0, 0.5, 2.0, "USD")),
            ("dear", price(3.0, 4.0, 15.0, "USD")),
            ("euro", price(1.0, 1.0, 1.0, "EUR")),
        ]);
        let targets: Vec<_> = targets.iter().map(|p| target(p)).collect();
        let prices = TargetPrices::of(Some(&book as &dyn PriceBook), &targets);
        (targets, prices)
    }

    #[test]
    fn each_attempt_is_charged_at_its_own_target_and_reserved_at_the_dearest() {
        let (targets, prices) = priced(&["cheap", "dear"]);
        let charges = Charges::of(&money(), &prices, &targets).unwrap();
        assert_eq!(
            charges.rate(),
            Rate {
                input: PerToken::per_million(4.0),
                output: PerToken::per_million(15.0)
            },
            "a cached token dearer than a fresh one bounds input"
        );
        let worst = charges.worst(0, 1000, 500);
        assert_eq!(
            worst,
            Spend {
                requests: 1,
                output_tokens: 1000,
                input_tokens: 500,
                cost: 500 * 1000 + 1000 * 2000,
            }
        );
        let usage = Usage {
            input: Some(100),
            cached: None,
            written: None,
            output: Some(10),
        };
        let cost = prices.cost(1, usage, 500, 1000);
        assert_eq!(
            charges.spent(usage, 1000, 500, cost.as_ref()).cost,
            100 * 3000 + 10 * 15_000,
            "charged what the request was priced at"
        );
        let unbudgeted = Charges::default().spent(usage, 1000, 500, cost.as_ref());
        assert_eq!(unbudgeted.cost, 0, "a budget not in money counts no cost");
        assert_eq!(unbudgeted.output_tokens, 10);
    }

    #[test]
    fn a_target_without_a_price_in_the_budgets_currency_refuses_the_call() {
        for provider in ["euro", "nowhere"] {
            let (targets, prices) = priced(&["cheap", provider]);
            let e = Charges::of(&money(), &prices, &targets).unwrap_err();
            assert_eq!(e.code, ErrorCode::PolicyDenied);
            let d = e.details.unwrap();
            assert_eq!(d["reason"], "budget_unpriced");
            assert_eq!(d["provider"], provider);
            assert!(e.message.contains("has no price in USD"), "{}", e.message);
        }
    }
}

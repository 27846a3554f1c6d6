//! Money in exact decimal. Prices and amounts are integers of a small unit
//! (an amount in billionths of its currency's unit, a price per token in
//! femto-units, 10^-15), read from the decimal a person wrote and shown as
//! a decimal again: a binary float summed request after request drifts
//! (`0.0025022999999999994`), an integer does not.
//!
//! Written by hand: the one arithmetic needed is a fixed-point scale of
//! the shortest decimal an `f64` reads back as (TOML and JSON hand prices
//! over as `f64`), which no decimal crate does more simply.

use serde::Serializer;

/// Billionths of a currency's unit per unit: amounts count in them, so a
/// budget's ledger adds integers as it does tokens (18 billion units fit).
pub const NANOS_PER_UNIT: u64 = 1_000_000_000;

/// Femto-units per billionth: a price per token is held in femto-units, so
/// that a price per million tokens of up to nine decimals is exact.
const FEMTOS_PER_NANO: u128 = 1_000_000;

/// A price per token, in femto-units of its currency (10^-15).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PerToken(pub u64);

impl PerToken {
    /// A price written per million tokens (`2.5`), as the config says it;
    /// digits past the ninth decimal round up.
    pub fn per_million(amount: f64) -> Self {
        Self(clamped(scaled_up(amount, 9)))
    }

    /// A price written per token (`2.5e-06`), as LiteLLM's list says it.
    pub fn each(amount: f64) -> Self {
        Self(clamped(scaled_up(amount, 15)))
    }

    /// What `tokens` of this price cost, in femto-units.
    pub fn of(self, tokens: u64) -> u128 {
        u128::from(self.0) * u128::from(tokens)
    }

    /// The price per million tokens, for people to read.
    pub fn per_million_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

/// `femtos` in billionths, rounded up (a cost is never less than its
/// tokens' price), and at most `u64::MAX`.
pub fn femtos_to_nanos(femtos: u128) -> u64 {
    clamped(femtos.div_ceil(FEMTOS_PER_NANO))
}

/// `amount` in billionths, rounded up: a budget is never charged less than
/// a cost. Negative is nothing; an amount past counting (infinite, NaN) is
/// the most there is, never nothing: a budget refuses it, it does not pass.
pub fn to_nanos(amount: f64) -> u64 {
    if amount.is_nan() {
        return u64::MAX;
    }
    clamped(scaled_up(amount, 9))
}

/// Billionths as an amount, for a number that is a float anyway (a metric,
/// a span attribute): exact to the digit for amounts under a million.
pub fn from_nanos(nanos: u64) -> f64 {
    nanos as f64 / NANOS_PER_UNIT as f64
}

/// Billionths as the decimal they are: `2502300` is `0.0025023`, `0` is
/// `0`, with no trailing zeros and no exponent.
pub fn decimal(nanos: u64) -> String {
    let (whole, part) = (nanos / NANOS_PER_UNIT, nanos % NANOS_PER_UNIT);
    if part == 0 {
        return whole.to_string();
    }
    let digits = format!("{part:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Serializes billionths as a JSON number of their exact decimal digits.
pub fn serialize_decimal<S: Serializer>(nanos: &u64, s: S) -> Result<S::Ok, S::Error> {
    let raw = serde_json::value::RawValue::from_string(decimal(*nanos))
        .map_err(serde::ser::Error::custom)?;
    serde::Serialize::serialize(&raw, s)
}

fn clamped(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// `amount` times 10^`places`, from the shortest decimal that reads back
/// as it (what a person wrote: `1.5e-7` is `0.00000015`, never
/// `1.4999999999999999e-7`), rounded up past the last place. 0 for a
/// negative amount, `u128::MAX` for an infinite one.
fn scaled_up(amount: f64, places: u32) -> u128 {
    if amount.is_infinite() && amount > 0.0 {
        return u128::MAX;
    }
    // Negative, zero and NaN alike: nothing.
    if amount.is_nan() || amount <= 0.0 {
        return 0;
    }
    // `Display` of an f64 is its shortest round-trip decimal, without an
    // exponent.
    let text = amount.to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let places = places as usize;
    let kept = &fraction[..fraction.len().min(places)];
    let scale = |digits: &str| -> Option<u128> {
        digits.bytes().try_fold(0u128, |n, d| {
            n.checked_mul(10)?.checked_add(u128::from(d - b'0'))
        })
    };
    let padding = 10u128.pow((places - kept.len()) as u32);
    let value = scale(whole)
        .and_then(|w| w.checked_mul(10u128.pow(places as u32)))
        .and_then(|w| w.checked_add(scale(kept)? * padding));
    let Some(value) = value else {
        return u128::MAX;
    };
    let rest = fraction.get(places..).unwrap_or("");
    value + u128::from(rest.bytes().any(|d| d != b'0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_read_as_the_decimals_people_wrote() {
        assert_eq!(PerToken::per_million(2.5), PerToken(2_500_000_000));
        assert_eq!(PerToken::per_million(0.01875), PerToken(18_750_000));
        assert_eq!(PerToken::each(2.5e-6), PerToken(2_500_000_000));
        assert_eq!(PerToken::each(1.875e-8), PerToken(18_750_000));
        assert_eq!(
            PerToken::per_million(1e-12),
            PerToken(1),
            "past nine places: up"
        );
        assert_eq!(PerToken::per_million(-1.0), PerToken(0));
        assert_eq!(PerToken::per_million(1e300), PerToken(u64::MAX));
    }

    #[test]
    fn nanos_round_up_and_read_back() {
        assert_eq!(to_nanos(5.0), 5_000_000_000);
        assert_eq!(to_nanos(1.5e-7), 150);
        assert_eq!(
            to_nanos(0.1 + 0.2),
            300_000_001,
            "the float's own digits, up"
        );
        assert_eq!(to_nanos(1e-10), 1, "never charged less than a cost");
        assert_eq!(to_nanos(0.0), 0);
        assert_eq!(to_nanos(-1.0), 0);
        assert_eq!(to_nanos(f64::NAN), u64::MAX, "an overflow is not free");
        assert_eq!(to_nanos(f64::INFINITY), u64::MAX);
        assert_eq!(to_nanos(1e30), u64::MAX);
        assert!((from_nanos(2_500_000_000) - 2.5).abs() < 1e-12);
        assert_eq!(femtos_to_nanos(1), 1);
        assert_eq!(femtos_to_nanos(2_000_000), 2);
        assert_eq!(femtos_to_nanos(u128::MAX), u64::MAX);
    }

    #[test]
    fn amounts_are_shown_as_their_exact_decimals() {
        assert_eq!(decimal(2_502_300), "0.0025023");
        assert_eq!(decimal(0), "0");
        assert_eq!(decimal(5_000_000_000), "5");
        assert_eq!(decimal(1), "0.000000001");
        assert_eq!(decimal(12_345_000_000_001), "12345.000000001");
        assert_eq!(decimal(u64::MAX), "18446744073.709551615");
        let json = serde_json::to_string(&Shown { amount: 413 }).unwrap();
        assert_eq!(json, r#"{"amount":0.000000413}"#);
    }

    #[derive(serde::Serialize)]
    struct Shown {
        #[serde(serialize_with = "serialize_decimal")]
        amount: u64,
    }
}

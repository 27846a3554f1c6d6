//! Every `x-callai-*` header an answer carries, in one place: the call's
//! id, its RFC 0248 attempts, what it cost, and what is left of the
//! caller's budget and limits (`x-ratelimit-*`, as OpenAI names them). The names are made once: a name given as a `&str` is
//! copied into a fresh allocation at each insert, these are not. The log
//! line reads its figures back by the same names.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use callai_engine::budget::KEYS;
use callai_engine::cost::{Cost, NANOS_PER_UNIT};
use callai_engine::wire::{Attempts, StructuredOutput};
use callai_gateway::call::Charged;
use callai_gateway::tenants::TenantBudget;

/// The call's id: its trace is `GET /v1/calls/{id}`.
pub const CALL_ID: HeaderName = HeaderName::from_static("x-callai-call-id");
/// What the call cost, a decimal.
pub const COST: HeaderName = HeaderName::from_static("x-callai-cost");
/// The currency of [`COST`].
pub const COST_CURRENCY: HeaderName = HeaderName::from_static("x-callai-cost-currency");
/// RFC 0248's `attempts.count`.
pub const ATTEMPTS_COUNT: HeaderName = HeaderName::from_static("x-callai-attempts-count");
/// RFC 0248's `attempts.outputTokens`.
pub const ATTEMPTS_OUTPUT_TOKENS: HeaderName =
    HeaderName::from_static("x-callai-attempts-output-tokens");
const USAGE_COMPLETE: HeaderName = HeaderName::from_static("x-callai-usage-complete");
const STRUCTURED_OUTPUT: HeaderName = HeaderName::from_static("x-callai-structured-output");

/// What is left of the caller's budget, in the order of the budget's keys.
const REMAINING: [HeaderName; 4] = [
    HeaderName::from_static("x-callai-budget-remaining-requests"),
    HeaderName::from_static("x-callai-budget-remaining-output-tokens"),
    HeaderName::from_static("x-callai-budget-remaining-input-tokens"),
    HeaderName::from_static("x-callai-budget-remaining-cost"),
];

/// Each key's tightest limit, in OpenAI's shape: its limit, what is left
/// and when its window resets, in the order of the budget's keys.
const RATE_LIMITS: [[HeaderName; 3]; 4] = [
    [
        HeaderName::from_static("x-ratelimit-limit-requests"),
        HeaderName::from_static("x-ratelimit-remaining-requests"),
        HeaderName::from_static("x-ratelimit-reset-requests"),
    ],
    [
        HeaderName::from_static("x-ratelimit-limit-output-tokens"),
        HeaderName::from_static("x-ratelimit-remaining-output-tokens"),
        HeaderName::from_static("x-ratelimit-reset-output-tokens"),
    ],
    [
        HeaderName::from_static("x-ratelimit-limit-input-tokens"),
        HeaderName::from_static("x-ratelimit-remaining-input-tokens"),
        HeaderName::from_static("x-ratelimit-reset-input-tokens"),
    ],
    [
        HeaderName::from_static("x-ratelimit-limit-cost"),
        HeaderName::from_static("x-ratelimit-remaining-cost"),
        HeaderName::from_static("x-ratelimit-reset-cost"),
    ],
];

/// Adds the call's id.
pub fn call_id(headers: &mut HeaderMap, id: &str) {
    if let Ok(value) = HeaderValue::from_str(id) {
        headers.insert(CALL_ID, value);
    }
}

/// Adds the RFC 0248 headers of `attempts`.
pub fn attempts(headers: &mut HeaderMap, attempts: &Attempts) {
    headers.insert(ATTEMPTS_COUNT, HeaderValue::from(attempts.count));
    if let Some(t) = attempts.output_tokens {
        headers.insert(ATTEMPTS_OUTPUT_TOKENS, HeaderValue::from(t));
    }
    let complete = if attempts.usage_complete {
        "true"
    } else {
        "false"
    };
    headers.insert(USAGE_COMPLETE, HeaderValue::from_static(complete));
    let mode = match attempts.structured_output {
        Some(StructuredOutput::Native) => "native",
        Some(StructuredOutput::Prompt) => "prompt",
        None => "none",
    };
    headers.insert(STRUCTURED_OUTPUT, HeaderValue::from_static(mode));
}

/// The RFC 0248 `attempts` an answer's headers carry ([`attempts`]), when
/// they carry them (a streamed answer's go out before they are known).
pub fn attempts_of(headers: &HeaderMap) -> Option<Attempts> {
    let text = |name: &HeaderName| headers.get(name)?.to_str().ok();
    let count = text(&ATTEMPTS_COUNT)?.parse().ok()?;
    Some(Attempts {
        count,
        output_tokens: text(&ATTEMPTS_OUTPUT_TOKENS).and_then(|t| t.parse().ok()),
        usage_complete: text(&USAGE_COMPLETE) != Some("false"),
        structured_output: match text(&STRUCTURED_OUTPUT) {
            Some("native") => Some(StructuredOutput::Native),
            Some("prompt") => Some(StructuredOutput::Prompt),
            _ => None,
        },
    })
}

/// Adds what a call charged: what is left of the caller's budget (when it
/// has one) and what the call cost (when a price is known), into the
/// answer's own map (no map of their own merged in).
pub fn charged(headers: &mut HeaderMap, charged: &Charged) {
    if let Some(budget) = &charged.budget {
        remaining(headers, budget);
        rate_limits(headers, budget);
    }
    cost(headers, charged.cost.as_ref());
}

/// Adds `x-callai-cost` (the amount, a decimal) and its currency.
pub fn cost(headers: &mut HeaderMap, cost: Option<&Cost>) {
    let Some(cost) = cost else { return };
    if let (Some(amount), Ok(currency)) =
        (decimal(cost.nanos), HeaderValue::from_str(&cost.currency))
    {
        headers.insert(COST, amount);
        headers.insert(COST_CURRENCY, currency);
    }
}

/// Adds the `x-callai-budget-remaining-*` headers, one per limited key,
/// as this host last saw the window.
fn remaining(headers: &mut HeaderMap, budget: &TenantBudget) {
    let Some(left) = budget.remaining() else {
        return;
    };
    for ((name, left), key) in REMAINING.into_iter().zip(left).zip(KEYS) {
        let value = match (left, key) {
            (None, _) => continue,
            // Money as `x-callai-cost` writes it.
            (Some(left), "cost") => decimal(left),
            (Some(left), _) => Some(HeaderValue::from(left)),
        };
        if let Some(value) = value {
            headers.insert(name, value);
        }
    }
}

/// Adds the `x-ratelimit-*` headers: for each limited key, its tightest
/// limit (the one with the least left), what is left of it, and how long
/// until its window resets (none for a lifetime limit), as OpenAI writes
/// it (`1m0s`, `59s`, `250ms`).
fn rate_limits(headers: &mut HeaderMap, budget: &TenantBudget) {
    let now = callai_engine::events::now_ms();
    for limit in budget.rate_limits() {
        let Some(i) = KEYS.iter().position(|k| *k == limit.key) else {
            continue;
        };
        let [limit_name, remaining_name, reset_name] = RATE_LIMITS[i].clone();
        let amount = |v: u64| match limit.key {
            "cost" => decimal(v),
            _ => Some(HeaderValue::from(v)),
        };
        if let (Some(l), Some(r)) = (amount(limit.limit), amount(limit.remaining)) {
            headers.insert(limit_name, l);
            headers.insert(remaining_name, r);
        }
        if let Some(at) = limit.resets_at_ms
            && let Ok(value) = HeaderValue::from_str(&go_duration(at.saturating_sub(now)))
        {
            headers.insert(reset_name, value);
        }
    }
}

/// Anthropic's names of the `requests`, `output-tokens` and `input-tokens`
/// rows of [`RATE_LIMITS`] (a limit in money has none).
const ANTHROPIC_RATE_LIMITS: [[HeaderName; 3]; 3] = [
    [
        HeaderName::from_static("anthropic-ratelimit-requests-limit"),
        HeaderName::from_static("anthropic-ratelimit-requests-remaining"),
        HeaderName::from_static("anthropic-ratelimit-requests-reset"),
    ],
    [
        HeaderName::from_static("anthropic-ratelimit-output-tokens-limit"),
        HeaderName::from_static("anthropic-ratelimit-output-tokens-remaining"),
        HeaderName::from_static("anthropic-ratelimit-output-tokens-reset"),
    ],
    [
        HeaderName::from_static("anthropic-ratelimit-input-tokens-limit"),
        HeaderName::from_static("anthropic-ratelimit-input-tokens-remaining"),
        HeaderName::from_static("anthropic-ratelimit-input-tokens-reset"),
    ],
];

/// Beside an answer's `x-ratelimit-*` headers ([`rate_limits`]), the same
/// as Anthropic's API writes them on `/v1/messages`:
/// `anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`,
/// the reset an RFC 3339 time (to the second, rounded up).
pub fn anthropic_rate_limits(headers: &mut HeaderMap) {
    let now = callai_engine::events::now_ms();
    for (ours, theirs) in RATE_LIMITS.iter().zip(ANTHROPIC_RATE_LIMITS) {
        for (i, name) in theirs.into_iter().enumerate() {
            let Some(value) = headers.get(&ours[i]) else {
                continue;
            };
            let value = if i < 2 {
                value.clone()
            } else {
                let Some(ms) = value.to_str().ok().and_then(go_duration_ms) else {
                    continue;
                };
                let at = (now + ms).div_ceil(1000);
                let at = jiff::Timestamp::from_second(i64::try_from(at).unwrap_or(i64::MAX));
                let Some(value) = at
                    .ok()
                    .and_then(|t| HeaderValue::from_str(&t.to_string()).ok())
                else {
                    continue;
                };
                value
            };
            headers.insert(name, value);
        }
    }
}

/// A duration as [`go_duration`] writes it, in milliseconds.
fn go_duration_ms(text: &str) -> Option<u64> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok();
    }
    let mut seconds = 0u64;
    let mut number = 0u64;
    for c in text.chars() {
        match c {
            '0'..='9' => number = number * 10 + u64::from(c.to_digit(10)?),
            'h' => (seconds, number) = (seconds + number * 3600, 0),
            'm' => (seconds, number) = (seconds + number * 60, 0),
            's' => (seconds, number) = (seconds + number, 0),
            _ => return None,
        }
    }
    (number == 0).then_some(seconds * 1000)
}

/// `ms` as Go writes a duration, which is how OpenAI's headers say a
/// reset: `250ms`, `59s`, `1m0s`, `2h3m4s` (whole seconds past one).
fn go_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let seconds = ms.div_ceil(1000);
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// `nanos` billionths as a header value: the exact decimal
/// (`0.0025023`), never an exponent, as the bodies write it. Written on the
/// stack first: through a `String` it would be two allocations, not the
/// header value's one.
fn decimal(nanos: u64) -> Option<HeaderValue> {
    use std::io::Write as _;
    let (whole, part) = (nanos / NANOS_PER_UNIT, nanos % NANOS_PER_UNIT);
    // u64::MAX is 20 digits: 20 + '.' + 9 fits.
    let mut buf = [0u8; 32];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    write!(cursor, "{whole}.{part:09}").ok()?;
    let len = cursor.position() as usize;
    let written = &buf[..len];
    let kept = written
        .iter()
        .rposition(|&b| b != b'0')
        .map_or(written, |last| &written[..=last]);
    HeaderValue::from_bytes(kept.strip_suffix(b".").unwrap_or(kept)).ok()
}

#[cfg(test)]
mod tests {
    use super::{
        Attempts, HeaderMap, HeaderValue, StructuredOutput, anthropic_rate_limits, attempts,
        attempts_of, decimal, go_duration, go_duration_ms,
    };

    #[test]
    fn a_go_duration_reads_back_and_anthropic_names_its_reset_a_time() {
        for ms in [250, 59_000, 60_000, 3_723_000] {
            assert_eq!(go_duration_ms(&go_duration(ms)), Some(ms));
        }
        assert_eq!(go_duration_ms("5x"), None);
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-limit-requests", HeaderValue::from(3));
        headers.insert("x-ratelimit-remaining-requests", HeaderValue::from(1));
        headers.insert(
            "x-ratelimit-reset-requests",
            HeaderValue::from_static("1m0s"),
        );
        headers.insert("x-ratelimit-limit-cost", HeaderValue::from(9));
        anthropic_rate_limits(&mut headers);
        assert_eq!(headers["anthropic-ratelimit-requests-limit"], "3");
        assert_eq!(headers["anthropic-ratelimit-requests-remaining"], "1");
        let reset: jiff::Timestamp = headers["anthropic-ratelimit-requests-reset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let ahead = reset.as_second() - jiff::Timestamp::now().as_second();
        assert!((59..=61).contains(&ahead), "{ahead}");
        assert!(
            headers
                .get("anthropic-ratelimit-input-tokens-limit")
                .is_none()
        );
        let theirs = headers
            .keys()
            .filter(|k| k.as_str().starts_with("anthropic-"));
        assert_eq!(theirs.count(), 3);
    }

    #[test]
    fn the_attempts_headers_read_back_as_they_were_written() {
        for sent in [
            Attempts {
                count: 3,
                output_tokens: Some(41),
                usage_complete: false,
                structured_output: Some(StructuredOutput::Prompt),
            },
            Attempts {
                count: 1,
                output_tokens: None,
                usage_complete: true,
                structured_output: None,
            },
        ] {
            let mut headers = HeaderMap::new();
            attempts(&mut headers, &sent);
            assert_eq!(attempts_of(&headers), Some(sent));
        }
        assert_eq!(attempts_of(&HeaderMap::new()), None);
    }

    #[test]
    fn a_reset_is_written_as_go_writes_a_duration() {
        assert_eq!(go_duration(250), "250ms");
        assert_eq!(go_duration(59_000), "59s");
        assert_eq!(go_duration(59_001), "1m0s");
        assert_eq!(go_duration(3_723_000), "1h2m3s");
    }

    #[test]
    fn an_amount_is_its_exact_decimal_never_an_exponent() {
        let text = |nanos: u64| decimal(nanos).unwrap().to_str().unwrap().to_owned();
        assert_eq!(text(0), "0");
        assert_eq!(text(150), "0.00000015");
        assert_eq!(text(2_500_000_000), "2.5");
        assert_eq!(text(2_502_300), "0.0025023");
        assert_eq!(text(12_345_678_000_000_000), "12345678");
        assert_eq!(text(10_000_000_000), "10", "zeros of the whole part kept");
        assert_eq!(text(u64::MAX), "18446744073.709551615");
        for nanos in [1, 7, 123_456_789, 98_765_432_100] {
            assert_eq!(text(nanos), callai_engine::cost::decimal(nanos));
        }
    }
}

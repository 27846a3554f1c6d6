//! The most a call can spend, known before it sends anything: its retry
//! policy bounds the requests, the budget growth bounds the output tokens,
//! and the bytes of what each attempt would send bound the input tokens (no
//! token covers less than a byte, so no tokenizer is needed).

use super::{Limits, Spend};
use crate::config::HostConfig;
use crate::cost::{PerToken, femtos_to_nanos};
use callai_wire::{CallRequest, RetryPolicy};

/// Tokens a provider adds around each message (role markers, separators)
/// that are not in its text: more than any chat format in use adds.
pub(crate) const MESSAGE_OVERHEAD: u64 = 16;
/// Tokens a provider adds to each request (reply priming, the schema's
/// wrapping in native mode).
pub(crate) const REQUEST_OVERHEAD: u64 = 64;
/// Input tokens an image may cost: above the most either API charges for
/// the largest image it takes (Anthropic about 3,300 for a 1568-pixel
/// square; OpenAI's tiles and patches less), whatever its bytes.
pub(crate) const IMAGE_INPUT_TOKENS: u64 = 4_000;
/// The most bytes of fixed text the engine writes into a retry (the
/// corrective instruction, the fallback's and prompt mode's instructions),
/// beyond what they quote. `prompts.rs` tests that each fits.
pub(crate) const FIXED_TEXT_BYTES: u64 = 512;
/// The most bytes of a validator's complaint a corrective retry quotes.
pub const MAX_COMPLAINT_BYTES: usize = 2048;
/// The most bytes per token of budget that a reply the fallback converts
/// may have: the fallback quotes the reply, and what it quotes is bounded
/// before the call starts. A longer reply gets a corrective retry instead.
pub const FALLBACK_BYTES_PER_TOKEN: u64 = 8;

/// The requests a call may make and the output budget of each, in order:
/// the caller's `maxTokens` (or the default), multiplied after each
/// truncation and clamped to `providerMaxTokens`; no growth with
/// `growMaxTokens: false`, nor for a text call (`structured` false), whose
/// truncation is reported, not retried. The retry engine follows the same
/// rules.
pub fn attempt_budgets(config: &HostConfig, request: &CallRequest, structured: bool) -> Vec<u32> {
    let first = request
        .max_tokens
        .unwrap_or(config.retry.default_max_tokens)
        .min(config.retry.provider_max_tokens);
    budgets_from(config, request, structured, first)
}

/// [`attempt_budgets`] of `request` had it asked for `first` tokens.
fn budgets_from(
    config: &HostConfig,
    request: &CallRequest,
    structured: bool,
    first: u32,
) -> Vec<u32> {
    let retry = &config.retry;
    let policy = match config.call_accounting.retry_policy {
        true => request.retry.unwrap_or_default(),
        false => RetryPolicy::default(),
    };
    let cap = policy.max_attempts.map_or(retry.max_retry_attempts, |n| {
        n.min(retry.max_retry_attempts)
    });
    let grow = structured && policy.grow_max_tokens.unwrap_or(true);
    let mut budget = first;
    let mut budgets = Vec::with_capacity(cap as usize);
    for _ in 0..cap {
        budgets.push(budget);
        if grow {
            budget = budget
                .saturating_mul(retry.truncation_budget_multiplier)
                .min(retry.provider_max_tokens);
        }
    }
    budgets
}

/// What bounds a call's worst case beside its request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bounds {
    /// The length of the `responseSchema`'s (and tools') text for a
    /// structured call; `None` for a text call.
    pub schema_bytes: Option<u64>,
    /// Input tokens the provider adds to each request unseen.
    pub overhead: u64,
    /// The most a token may cost at any target the call may reach (free
    /// for a budget not in money).
    pub rate: Rate,
}

/// The dearest price per token among a call's targets, input and output
/// each at its own dearest: a bound on any attempt's cost, whichever
/// target it reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    /// Per input token.
    pub input: PerToken,
    /// Per output token.
    pub output: PerToken,
}

/// The worst case of one call: every request its policy allows, each at
/// its largest output budget and with the most text it could carry, with
/// the overhead and at the rate of `bounds`.
pub fn worst_case(config: &HostConfig, request: &CallRequest, bounds: &Bounds) -> Spend {
    let budgets = attempt_budgets(config, request, bounds.schema_bytes.is_some());
    worst_of(&budgets, request, bounds)
}

/// The largest `maxAttempts` below the one `request` asks for whose worst
/// case fits `room` (what is left of each limited key): what a refused
/// call could ask for now. `None` when not even one attempt fits, or the
/// host takes no per-call `retry` (`callAccounting.retryPolicy` false).
pub fn fitting_attempts(
    config: &HostConfig,
    request: &CallRequest,
    bounds: &Bounds,
    room: &Limits,
) -> Option<u32> {
    if !config.call_accounting.retry_policy {
        return None;
    }
    let budgets = attempt_budgets(config, request, bounds.schema_bytes.is_some());
    // A call of fewer attempts makes the first of these requests.
    (1..budgets.len()).rev().find_map(|k| {
        let worst = worst_of(&budgets[..k], request, bounds);
        fits_in(&worst, room).then(|| u32::try_from(k).unwrap_or(u32::MAX))
    })
}

/// The largest `maxTokens` below the one `request` asks for (or the
/// default it gets) whose worst case, with the call's own attempts, fits
/// `room`: what a refused call could ask for now. `None` when not even one
/// token fits (its input alone does not).
pub fn fitting_max_tokens(
    config: &HostConfig,
    request: &CallRequest,
    bounds: &Bounds,
    room: &Limits,
) -> Option<u32> {
    let structured = bounds.schema_bytes.is_some();
    let asked = attempt_budgets(config, request, structured)
        .first()
        .copied()?;
    let fits = |n: u32| {
        let worst = worst_of(
            &budgets_from(config, request, structured, n),
            request,
            bounds,
        );
        fits_in(&worst, room)
    };
    if asked <= 1 || !fits(1) {
        return None;
    }
    // The worst case grows with the first budget: the largest that fits
    // is found by halving, in at most 32 steps.
    let (mut low, mut high) = (1, asked - 1);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid) { low = mid } else { high = mid - 1 }
    }
    Some(low)
}

/// Whether every key of `worst` fits what `room` has left of it.
fn fits_in(worst: &Spend, room: &Limits) -> bool {
    worst
        .amounts()
        .iter()
        .zip(room.amounts())
        .all(|(&needed, left)| left.is_none_or(|left| needed <= left))
}

/// The worst case of the requests of output budgets `budgets`.
fn worst_of(budgets: &[u32], request: &CallRequest, bounds: &Bounds) -> Spend {
    let Bounds {
        schema_bytes,
        overhead,
        rate,
    } = *bounds;
    let text = text_bound(&request.messages, request.system_prompt.as_deref());
    let mut input = 0u64;
    for i in 0..budgets.len() {
        input = input.saturating_add(overhead);
        input = input.saturating_add(match (i, schema_bytes) {
            // A text call is never retried with other text.
            (_, None) => text,
            // The schema travels twice at most: in the request's
            // structured-output field, and in the prompt (prompt mode).
            (0, Some(schema)) => text + 2 * schema + FIXED_TEXT_BYTES,
            (_, Some(schema)) => {
                // A corrective retry adds one message; the fallback sends
                // the previous reply (bounded by its budget) and the schema
                // once more instead of the caller's messages.
                let corrective =
                    text + 2 * schema + 2 * FIXED_TEXT_BYTES + MAX_COMPLAINT_BYTES as u64;
                let previous = u64::from(budgets[i - 1]);
                let fallback = previous * FALLBACK_BYTES_PER_TOKEN
                    + 3 * schema
                    + 2 * FIXED_TEXT_BYTES
                    + MESSAGE_OVERHEAD
                    + REQUEST_OVERHEAD;
                corrective.max(fallback)
            }
        });
    }
    let output: u64 = budgets.iter().map(|b| u64::from(*b)).sum();
    Spend {
        requests: budgets.len() as u64,
        output_tokens: output,
        input_tokens: input,
        cost: femtos_to_nanos(rate.input.of(input) + rate.output.of(output)),
    }
}

/// The bytes bound of what one request sends: its text, its schema (of
/// `schema_bytes`, in its structured-output field), and the overheads
/// above. An attempt that reported no input usage is charged this.
pub(crate) fn request_bound(request: &crate::provider::ProviderRequest, schema_bytes: u64) -> u64 {
    let carries = request.structured.is_some() || request.tools.is_some();
    text_bound(&request.messages, request.system_prompt.as_deref())
        + if carries { schema_bytes } else { 0 }
}

/// The bytes of a request's text with the overheads around it: what the
/// caller's request and each attempt built from it are bounded by.
fn text_bound(messages: &[callai_wire::Message], system_prompt: Option<&str>) -> u64 {
    messages
        .iter()
        .map(|m| {
            let calls: u64 = m
                .tool_calls
                .iter()
                .map(|c| (c.id.len() + c.name.len() + c.arguments.len()) as u64 + MESSAGE_OVERHEAD)
                .sum();
            let call_id = m.tool_call_id.as_ref().map_or(0, |id| id.len() as u64);
            let images = m.images.len() as u64 * IMAGE_INPUT_TOKENS;
            m.content.len() as u64 + calls + call_id + images + MESSAGE_OVERHEAD
        })
        .sum::<u64>()
        + system_prompt.map_or(0, |s| s.len() as u64)
        + REQUEST_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_wire::RetryField;

    fn request(json: &str) -> CallRequest {
        CallRequest::from_json(json, RetryField::Honoured).unwrap()
    }

    fn config(toml: &str) -> HostConfig {
        HostConfig::from_toml(toml).unwrap()
    }

    fn structured(schema_bytes: u64) -> Bounds {
        Bounds {
            schema_bytes: Some(schema_bytes),
            ..Bounds::default()
        }
    }

    #[test]
    fn the_worked_example_reserves_fourteen_thousand_output_tokens() {
        // maxAttempts 3, maxTokens 2000, multiplier 2, ceiling 64000.
        let c = config("[retry]\ntruncationBudgetMultiplier = 2\nproviderMaxTokens = 64000\n");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 2000, "retry": {"maxAttempts": 3}}"#,
        );
        assert_eq!(attempt_budgets(&c, &r, true), vec![2000, 4000, 8000]);
        let w = worst_case(&c, &r, &structured(20));
        assert_eq!((w.requests, w.output_tokens), (3, 14000));
        // A text call's truncation is not retried: no growth.
        let w = worst_case(&c, &r, &Bounds::default());
        assert_eq!((w.requests, w.output_tokens), (3, 6000));
        assert_eq!(
            w.input_tokens,
            3 * (2 + MESSAGE_OVERHEAD + REQUEST_OVERHEAD)
        );
    }

    #[test]
    fn growth_clamps_at_the_ceiling_and_stops_when_turned_off() {
        let c = config("[retry]\nmaxRetryAttempts = 4\nproviderMaxTokens = 5000\n");
        let r = request(r#"{"messages": [{"role": "user", "content": "x"}], "maxTokens": 2000}"#);
        assert_eq!(attempt_budgets(&c, &r, true), vec![2000, 4000, 5000, 5000]);
        let r = request(
            r#"{"messages": [{"role": "user", "content": "x"}], "maxTokens": 9000, "retry": {"maxAttempts": 9}}"#,
        );
        assert_eq!(
            attempt_budgets(&c, &r, true),
            vec![5000; 4],
            "clamped to the ceiling"
        );
        let r = request(
            r#"{"messages": [{"role": "user", "content": "x"}], "maxTokens": 2000, "retry": {"maxAttempts": 2, "growMaxTokens": false}}"#,
        );
        assert_eq!(attempt_budgets(&c, &r, true), vec![2000, 2000]);
        let r = request(r#"{"messages": [{"role": "user", "content": "x"}]}"#);
        assert_eq!(
            attempt_budgets(&c, &r, true),
            vec![4000, 5000, 5000, 5000],
            "default 4000"
        );
    }

    #[test]
    fn a_refused_call_is_told_the_largest_max_tokens_that_fits_with_its_attempts() {
        let c = config("");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 2}}"#,
        );
        let room = |output_tokens, cost| Limits {
            requests: None,
            output_tokens,
            input_tokens: None,
            cost,
        };
        // A text call of two attempts at the default 4000: 8000 out.
        let text = Bounds::default();
        assert_eq!(
            fitting_max_tokens(&c, &r, &text, &room(Some(7999), None)),
            Some(3999)
        );
        assert_eq!(
            fitting_max_tokens(&c, &r, &text, &room(Some(600), None)),
            Some(300)
        );
        assert_eq!(
            fitting_max_tokens(&c, &r, &text, &room(Some(1), None)),
            None
        );
        // A structured call grows: n + 2n must fit 3000.
        assert_eq!(
            fitting_max_tokens(&c, &r, &structured(20), &room(Some(3000), None)),
            Some(1000)
        );
        // In money, found where the price of the worst case fits; and what
        // it names fits, one token more does not.
        let priced = Bounds {
            rate: Rate {
                input: PerToken::per_million(2.0),
                output: PerToken::per_million(10.0),
            },
            ..Bounds::default()
        };
        let left = 5_000_000; // 0.005 USD
        let n = fitting_max_tokens(&c, &r, &priced, &room(None, Some(left))).unwrap();
        let with = |n: u32| {
            let mut r = r.clone();
            r.max_tokens = Some(n);
            worst_case(&c, &r, &priced).cost
        };
        assert!(with(n) <= left && with(n + 1) > left, "{n}");
        // Its input alone does not fit: nothing does.
        assert_eq!(
            fitting_max_tokens(&c, &r, &priced, &room(None, Some(10))),
            None
        );
    }

    #[test]
    fn a_refused_call_is_told_the_most_attempts_that_fit() {
        let c = config("");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 2000, "retry": {"maxAttempts": 3}}"#,
        );
        let room = |requests, output_tokens| Limits {
            requests,
            output_tokens,
            input_tokens: None,
            cost: None,
        };
        // 2000 + 4000 + 8000: two attempts need 6000, one 2000.
        assert_eq!(
            fitting_attempts(&c, &r, &structured(20), &room(Some(2), None)),
            Some(2)
        );
        assert_eq!(
            fitting_attempts(&c, &r, &structured(20), &room(None, Some(5999))),
            Some(1)
        );
        assert_eq!(
            fitting_attempts(&c, &r, &structured(20), &room(None, Some(6000))),
            Some(2)
        );
        assert_eq!(
            fitting_attempts(&c, &r, &structured(20), &room(Some(5), Some(1999))),
            None
        );
        // Every key counts: the requests fit two, the tokens only one.
        assert_eq!(
            fitting_attempts(&c, &r, &structured(20), &room(Some(2), Some(2000))),
            Some(1)
        );
        let fixed = config("[callAccounting]\nretryPolicy = false\n");
        assert_eq!(
            fitting_attempts(&fixed, &r, &structured(20), &room(Some(2), None)),
            None
        );
    }

    #[test]
    fn a_host_without_retry_policy_reads_no_narrowing() {
        let c = config("[callAccounting]\nretryPolicy = false\n");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "x"}], "maxTokens": 10, "retry": {"maxAttempts": 1}}"#,
        );
        assert_eq!(attempt_budgets(&c, &r, true).len(), 3);
    }

    #[test]
    fn a_providers_hidden_input_is_reserved_for_every_attempt() {
        let c = config("");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "x"}], "retry": {"maxAttempts": 2}}"#,
        );
        let plain = worst_case(&c, &r, &Bounds::default()).input_tokens;
        assert_eq!(
            worst_case(
                &c,
                &r,
                &Bounds {
                    overhead: 400,
                    ..Bounds::default()
                }
            )
            .input_tokens,
            plain + 2 * 400
        );
    }

    #[test]
    fn a_structured_call_reserves_its_schema_and_its_retries_text() {
        let c = config("");
        let r = request(r#"{"messages": [{"role": "user", "content": "abcd"}], "maxTokens": 100}"#);
        let text = worst_case(&c, &r, &Bounds::default()).input_tokens;
        let structured = worst_case(&c, &r, &structured(50)).input_tokens;
        assert!(structured > text + 3 * 50 + 2 * MAX_COMPLAINT_BYTES as u64);
    }

    #[test]
    fn money_is_the_worst_case_tokens_at_the_dearest_rate() {
        let c = config("");
        let r = request(
            r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 1000, "retry": {"maxAttempts": 2}}"#,
        );
        let rate = Rate {
            input: PerToken::per_million(2.0),
            output: PerToken::per_million(10.0),
        };
        let priced = Bounds {
            rate,
            ..Bounds::default()
        };
        let w = worst_case(&c, &r, &priced);
        assert_eq!(w.cost, w.input_tokens * 2000 + w.output_tokens * 10_000);
        assert_eq!(w.output_tokens, 2000);
        assert_eq!(worst_case(&c, &r, &Bounds::default()).cost, 0, "free");
        // One attempt fits what is left of the money, two do not.
        let one = worst_case(
            &c,
            &request(
                r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 1000, "retry": {"maxAttempts": 1}}"#,
            ),
            &priced,
        );
        let room = Limits {
            cost: Some(one.cost),
            ..Limits::default()
        };
        assert_eq!(fitting_attempts(&c, &r, &priced, &room), Some(1));
    }
}

//! The judges: pure functions from observations to findings. The suite wrote
//! each script, so it knows what every provider request returned; the mock's
//! request log says how many requests were sent and with which budget.

use super::{Finding, Observation};
use serde_json::Value;

/// A value for a message: its JSON, or `absent`.
fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "absent".into(), Value::to_string)
}

fn show_n<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "absent".into(), |n| n.to_string())
}

fn count_of(o: &Observation) -> Option<u64> {
    o.attempts()?.get("count")?.as_u64()
}

/// The script entry that answered request `i`.
fn reply(o: &Observation, i: usize) -> Option<&Value> {
    o.script.as_array()?.get(i)
}

/// The output tokens the mock reported for request `i` (clamped to that
/// request's budget), or `None` when the reply reported no usage.
fn reported_tokens(o: &Observation, i: usize) -> Option<u64> {
    let tokens = reply(o, i)?.get("outputTokens")?.as_u64()?;
    Some(tokens.min(u64::from(o.requests.get(i)?.max_tokens)))
}

/// §A.1: `attempts.count` equals the requests the mock received; where the
/// host emits `provider.usage`, one per request corroborates it.
pub fn count(o: &Observation) -> Finding {
    const RULE: &str = "A.1 count = provider requests";
    let sent = o.requests.len() as u64;
    let Some(count) = count_of(o) else {
        return Finding::new(RULE, false, format!("no attempts.count in {}", o.output));
    };
    if count != sent {
        return Finding::new(
            RULE,
            false,
            format!("count {count}, but the mock received {sent} requests"),
        );
    }
    let usage = o.events_named("provider.usage").len() as u64;
    if usage > 0 && usage != sent {
        return Finding::new(
            RULE,
            false,
            format!("{usage} provider.usage events for {sent} requests"),
        );
    }
    Finding::new(RULE, true, format!("count {count} = {sent} requests"))
}

/// §A.2: `attempts.outputTokens` is the sum over every attempt that reported usage.
pub fn output_tokens_sum(o: &Observation) -> Finding {
    const RULE: &str = "A.2 outputTokens summed";
    let reported: Vec<u64> = (0..o.requests.len())
        .filter_map(|i| reported_tokens(o, i))
        .collect();
    let expected = (!reported.is_empty()).then(|| reported.iter().sum::<u64>());
    let got = o
        .attempts()
        .and_then(|a| a.get("outputTokens"))
        .and_then(Value::as_u64);
    let ok = got == expected && o.attempts().is_some();
    Finding::new(
        RULE,
        ok,
        format!(
            "outputTokens {}, the attempts reported {reported:?} (sum {})",
            show_n(got),
            show_n(expected)
        ),
    )
}

/// §A.2: `usageComplete` is false exactly when an attempt reported no usage.
pub fn usage_complete(o: &Observation) -> Finding {
    const RULE: &str = "A.2 usageComplete";
    let complete =
        (0..o.requests.len()).all(|i| reply(o, i).is_some_and(|r| r.get("outputTokens").is_some()));
    let got = o
        .attempts()
        .and_then(|a| a.get("usageComplete"))
        .and_then(Value::as_bool);
    Finding::new(
        RULE,
        got == Some(complete),
        format!("usageComplete {}, expected {complete}", show_n(got)),
    )
}

/// §A.3: `structuredOutput` is the final attempt's mode; absent on a text call.
pub fn structured_output(o: &Observation, expected: Option<&str>) -> Finding {
    const RULE: &str = "A.3 structuredOutput";
    let got = o.attempts().and_then(|a| a.get("structuredOutput"));
    let final_mode = o
        .requests
        .last()
        .and_then(|r| r.structured_output)
        .map(|m| m.as_str());
    // The reported mode is the expected one, and it is what the mock saw
    // on the final request.
    let ok =
        o.attempts().is_some() && got.and_then(Value::as_str) == expected && final_mode == expected;
    Finding::new(
        RULE,
        ok,
        format!(
            "structuredOutput {}, expected {} (the mock saw {})",
            show(got),
            show_n(expected),
            show_n(final_mode)
        ),
    )
}

/// §A.4: `usage` is the final attempt's, not the sum.
pub fn usage_is_final_attempt(o: &Observation) -> Finding {
    const RULE: &str = "A.4 usage is the final attempt's";
    let last = o.requests.len().checked_sub(1);
    let expected = last.and_then(|i| reported_tokens(o, i));
    let got = o
        .output
        .get("usage")
        .and_then(|u| u.get("outputTokens"))
        .and_then(Value::as_u64);
    Finding::new(
        RULE,
        got == expected,
        format!(
            "usage.outputTokens {}, final attempt reported {}",
            show_n(got),
            show_n(expected)
        ),
    )
}

/// RFC 0032 as §B.4 relies on it: `envelope.retry.exhausted.totalAttempts`
/// is the number of requests actually sent.
pub fn total_attempts(o: &Observation) -> Finding {
    const RULE: &str = "B.4 exhausted.totalAttempts = requests sent";
    let sent = o.requests.len() as u64;
    let exhausted = o.events_named("envelope.retry.exhausted");
    let ok = o.error().is_some()
        && exhausted.len() == 1
        && exhausted[0].get("totalAttempts").and_then(Value::as_u64) == Some(sent);
    let got: Vec<String> = exhausted
        .iter()
        .map(|p| show(p.get("totalAttempts")))
        .collect();
    Finding::new(
        RULE,
        ok,
        format!(
            "exhausted totalAttempts [{}], {sent} requests sent",
            got.join(", ")
        ),
    )
}

/// §B.1: never more provider requests than `maxAttempts`.
pub fn cap(o: &Observation, max_attempts: u64) -> Finding {
    const RULE: &str = "B.1 at most maxAttempts requests";
    let sent = o.requests.len() as u64;
    Finding::new(
        RULE,
        sent <= max_attempts && sent >= 1,
        format!("{sent} requests under maxAttempts {max_attempts}"),
    )
}

/// §B.2: with `growMaxTokens: false` no request goes above `bound`.
pub fn no_growth(o: &Observation, bound: u32) -> Finding {
    const RULE: &str = "B.2 growMaxTokens false keeps the budget";
    let budgets: Vec<u32> = o.requests.iter().map(|r| r.max_tokens).collect();
    let ok = !budgets.is_empty() && budgets.iter().all(|&b| b <= bound);
    Finding::new(RULE, ok, format!("budgets {budgets:?}, bound {bound}"))
}

/// §B.3: a `maxAttempts` above the host ceiling is clamped, not refused.
pub fn clamped(o: &Observation, ceiling: u64) -> Finding {
    const RULE: &str = "B.3 a cap above the ceiling is clamped";
    let refused = o
        .error()
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        == Some("validation_error");
    let sent = o.requests.len() as u64;
    let ok = !refused && sent >= 1 && sent <= ceiling;
    Finding::new(
        RULE,
        ok,
        format!("refused: {refused}, {sent} requests, host ceiling {ceiling}"),
    )
}

/// §B.5: a malformed `retry` is refused with `validation_error` naming the key.
pub fn malformed_refused(o: &Observation, field: &str) -> Finding {
    const RULE: &str = "B.5 malformed retry refused naming the field";
    let error = o.error();
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_str);
    let named = error
        .and_then(|e| e.pointer("/details/field"))
        .and_then(Value::as_str);
    let ok = code == Some("validation_error") && named == Some(field) && o.requests.is_empty();
    Finding::new(
        RULE,
        ok,
        format!(
            "retry {} -> code {}, details.field {}, {} requests",
            show(o.request.get("retry")),
            show_n(code),
            show_n(named),
            o.requests.len()
        ),
    )
}

/// §A.5: a replay returns the recorded `attempts` exactly, with no request.
pub fn replay_equal(recorded: &Observation, replayed: &Observation) -> Finding {
    const RULE: &str = "A.5 replay returns the recorded attempts";
    let same = recorded.attempts().is_some() && recorded.attempts() == replayed.attempts();
    let ok = same && replayed.requests.is_empty();
    Finding::new(
        RULE,
        ok,
        format!(
            "recorded {}, replayed {}, {} requests on replay",
            show(recorded.attempts()),
            show(replayed.attempts()),
            replayed.requests.len()
        ),
    )
}

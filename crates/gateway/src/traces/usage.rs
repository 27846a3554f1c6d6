//! The kept calls of the last minutes summed per minute, provider requests
//! by provider and reason, and spend by tenant and currency
//! (`GET /v1/usage`: what the viewer's charts draw). Owner-scoped as the
//! calls are. With a run log, read from the sums it keeps as traces are
//! written (every host's calls, across restarts); else summed from the
//! calls in memory.

use super::record::CallTrace;
use super::store::CallStore;
use crate::error::GatewayError;
use callai_engine::runlog::{MINUTE_MS, MinuteSums, UsageBatch, minute_of};
use serde::Serialize;

/// The longest span a summary covers: a day.
const MAX_MINUTES: u64 = 24 * 60;

/// The requests of one minute to one provider for one reason.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestCount {
    minute_ms: u64,
    provider: String,
    reason: String,
    count: u64,
}

/// What one tenant's calls of one minute cost, in one currency.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    minute_ms: u64,
    tenant: String,
    currency: String,
    /// In billionths, shown as its exact decimal.
    #[serde(
        rename = "amount",
        serialize_with = "callai_engine::cost::serialize_decimal"
    )]
    nanos: u64,
    /// False when some request of them was priced at its worst case.
    complete: bool,
}

/// The answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// The first minute summed (its start, ms since the Unix epoch).
    since_ms: u64,
    /// The minutes summed.
    minutes: u64,
    /// The calls summed.
    calls: u64,
    /// Requests per minute, provider and reason; minutes with none left out.
    requests: Vec<RequestCount>,
    /// Spend per minute, tenant and currency; minutes with none left out.
    spend: Vec<Spend>,
}

/// Sums `traces` (any order) into minutes from `since_ms`, a minute's
/// start, as a run log sums them: each request counts in the minute its
/// call started, and a call's cost in billionths, rounded up.
fn summarize<'a>(
    since_ms: u64,
    minutes: u64,
    traces: impl Iterator<Item = &'a CallTrace>,
) -> Usage {
    let mut batch = UsageBatch::default();
    for t in traces {
        batch.add(&t.tenant, t.started_ms, &t.usage());
    }
    logged(since_ms, minutes, batch.sums())
}

/// The run log's sums of the minutes from `since_ms`, as the answer.
fn logged(since_ms: u64, minutes: u64, sums: MinuteSums) -> Usage {
    Usage {
        since_ms,
        minutes,
        calls: sums.calls,
        requests: sums
            .requests
            .into_iter()
            .map(|r| RequestCount {
                minute_ms: r.minute_ms,
                provider: r.provider,
                reason: r.reason,
                count: r.count,
            })
            .collect(),
        spend: sums
            .spend
            .into_iter()
            .map(|s| Spend {
                minute_ms: s.minute_ms,
                tenant: s.tenant,
                currency: s.currency,
                nanos: s.nanos,
                complete: s.complete,
            })
            .collect(),
    }
}

/// The summary of the last `minutes` (1..1440; 60 when `None`) back from
/// now, of `tenant`'s calls (`None`: every tenant's): of the calls the run
/// log keeps, or without one, of those `store` still keeps in memory
/// (`[server] keepCalls`).
pub async fn summary(
    store: &CallStore,
    tenant: Option<&str>,
    minutes: Option<u64>,
) -> Result<Usage, GatewayError> {
    let minutes = minutes.unwrap_or(60);
    if !(1..=MAX_MINUTES).contains(&minutes) {
        return Err(GatewayError::invalid(
            "minutes",
            format!("must be 1..{MAX_MINUTES}, got {minutes}"),
        ));
    }
    let now = callai_engine::events::now_ms();
    let since_ms = minute_of(now) - (minutes - 1) * MINUTE_MS;
    let sums = store.minute_sums(tenant, since_ms).await;
    if let Some(sums) = sums.map_err(|e| GatewayError::internal(e.to_string()))? {
        return Ok(logged(since_ms, minutes, sums));
    }
    // The traces are shared, not copied: the store's lock is held only to
    // count them out.
    let mut kept = Vec::new();
    store.each_since(tenant, since_ms, |t| kept.push(t.clone()));
    Ok(summarize(since_ms, minutes, kept.iter().map(|t| &**t)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::RequestTrace;
    use callai_engine::cost::Cost;
    use callai_engine::wire::Attempts;

    fn request(provider: &str, reason: &'static str) -> RequestTrace {
        RequestTrace {
            n: 1,
            reason,
            provider: provider.into(),
            model: "m".into(),
            max_tokens: 10,
            outcome: "stop",
            status: Some(200),
            input_tokens: Some(1),
            cached_input_tokens: None,
            cache_write_input_tokens: None,
            output_tokens: Some(1),
            latency_ms: 1,
            cost: None,
            answer: None,
        }
    }

    fn trace(
        tenant: &str,
        started_ms: u64,
        requests: Vec<RequestTrace>,
        cost: Option<u64>,
    ) -> CallTrace {
        CallTrace {
            id: format!("call_{started_ms}").into(),
            tenant: tenant.into(),
            endpoint: "call",
            run_id: None,
            node_id: "n".into(),
            prompt: None,
            started_ms,
            route: None,
            outcome: "ok",
            error: None,
            attempts: Attempts {
                count: 1,
                output_tokens: Some(1),
                usage_complete: true,
                structured_output: None,
            },
            cost: cost.map(|nanos| Cost {
                nanos,
                currency: "USD".into(),
                complete: nanos > 0,
            }),
            requests: requests.into(),
            duration_ms: 5,
            cache: None,
            cached_from: None,
        }
    }

    #[test]
    fn sums_requests_by_minute_provider_and_reason_and_spend_by_tenant() {
        let since = 600_000;
        let traces = [
            trace(
                "a",
                since + 1,
                vec![request("p", "first"), request("p", "truncation")],
                Some(500_000_000),
            ),
            trace(
                "a",
                since + 59_999,
                vec![request("p", "first")],
                Some(250_000_000),
            ),
            trace("b", since + 60_000, vec![request("q", "first")], Some(0)),
        ];
        let usage = summarize(since, 2, traces.iter());
        assert_eq!(usage.calls, 3);
        let counts: Vec<_> = usage
            .requests
            .iter()
            .map(|r| {
                (
                    r.minute_ms - since,
                    r.provider.as_str(),
                    r.reason.as_str(),
                    r.count,
                )
            })
            .collect();
        assert_eq!(
            counts,
            [
                (0, "p", "first", 2),
                (0, "p", "truncation", 1),
                (60_000, "q", "first", 1)
            ]
        );
        assert_eq!(usage.spend.len(), 2);
        assert_eq!(
            (usage.spend[0].tenant.as_str(), usage.spend[0].nanos),
            ("a", 750_000_000)
        );
        let shown = serde_json::to_value(&usage.spend[0]).unwrap();
        assert_eq!(shown["amount"], 0.75);
        assert!(usage.spend[0].complete);
        assert!(
            !usage.spend[1].complete,
            "b's zero-cost call was marked incomplete"
        );
    }
}

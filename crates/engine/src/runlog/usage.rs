//! What the kept calls add up to, minute by minute (`GET /v1/usage`, the
//! viewer's charts): provider requests by provider and reason, and calls
//! and their cost by tenant and currency. A run log that keeps traces keeps
//! these sums beside them, added as each trace is written, so a summary of
//! a day reads a few rows per minute, not every call of the day; and it
//! holds every host's calls, across restarts.

use std::collections::BTreeMap;

/// A minute's length, in ms: the sums' unit of time.
pub const MINUTE_MS: u64 = 60_000;

/// What one call adds to the sums of the minute it started in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceUsage {
    /// Its provider requests, each as `(provider, reason)`.
    pub requests: Vec<(String, String)>,
    /// What it cost, when a price was known.
    pub cost: Option<TraceCost>,
}

/// A call's cost, as the sums keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceCost {
    /// The currency (ISO 4217, as priced).
    pub currency: String,
    /// The amount, in billionths of the currency (rounded up).
    pub nanos: u64,
    /// False when some request of it was priced at its worst case.
    pub complete: bool,
}

/// Provider requests of one minute, to one provider, for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteRequests {
    /// The minute's start, ms since the Unix epoch.
    pub minute_ms: u64,
    /// The provider.
    pub provider: String,
    /// Why they were sent (`first`, `truncation`, ...).
    pub reason: String,
    /// How many.
    pub count: u64,
}

/// What one tenant's calls of one minute cost, in one currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteSpend {
    /// The minute's start, ms since the Unix epoch.
    pub minute_ms: u64,
    /// The tenant.
    pub tenant: String,
    /// The currency.
    pub currency: String,
    /// The amount, in billionths of the currency.
    pub nanos: u64,
    /// False when some request of them was priced at its worst case.
    pub complete: bool,
}

/// The sums of the minutes from one on, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MinuteSums {
    /// The calls that started in them.
    pub calls: u64,
    /// Requests per minute, provider and reason.
    pub requests: Vec<MinuteRequests>,
    /// Spend per minute, tenant and currency.
    pub spend: Vec<MinuteSpend>,
}

/// The start of the minute `ms` falls in.
pub fn minute_of(ms: u64) -> u64 {
    ms - ms % MINUTE_MS
}

/// What a batch of traces adds to the kept sums, gathered so that a batch
/// of many calls writes one row per minute and key, not one per call.
#[derive(Debug, Default)]
pub struct UsageBatch {
    /// Calls, cost and completeness by (minute, tenant, currency); the
    /// currency is empty for calls with no price.
    pub calls: BTreeMap<(u64, String, String), CallsSum>,
    /// Requests by (minute, tenant, provider, reason).
    pub requests: BTreeMap<(u64, String, String, String), u64>,
}

/// The calls of one minute, tenant and currency in a [`UsageBatch`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallsSum {
    /// How many.
    pub calls: u64,
    /// Their cost, billionths (saturating).
    pub nanos: u64,
    /// Whether some were priced at their worst case.
    pub incomplete: bool,
}

impl UsageBatch {
    /// Adds the call of `tenant` that started at `started_ms`.
    pub fn add(&mut self, tenant: &str, started_ms: u64, usage: &TraceUsage) {
        let minute = minute_of(started_ms);
        let currency = usage.cost.as_ref().map_or("", |c| c.currency.as_str());
        let sum = self
            .calls
            .entry((minute, tenant.to_owned(), currency.to_owned()))
            .or_default();
        sum.calls += 1;
        if let Some(cost) = &usage.cost {
            sum.nanos = sum.nanos.saturating_add(cost.nanos);
            sum.incomplete |= !cost.complete;
        }
        for (provider, reason) in &usage.requests {
            *self
                .requests
                .entry((minute, tenant.to_owned(), provider.clone(), reason.clone()))
                .or_default() += 1;
        }
    }

    /// Whether it adds nothing.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// What it adds up to, as a run log answers
    /// [`super::TraceLog::minute_sums`]: requests summed over tenants, in
    /// order of minute, provider and reason; spend of the priced calls in
    /// order of minute, tenant and currency. A host with no run log sums
    /// the calls it keeps in memory this way, so that both answer alike.
    pub fn sums(&self) -> MinuteSums {
        let mut requests: BTreeMap<(u64, &str, &str), u64> = BTreeMap::new();
        for ((minute, _, provider, reason), count) in &self.requests {
            *requests.entry((*minute, provider, reason)).or_default() += count;
        }
        MinuteSums {
            calls: self.calls.values().map(|s| s.calls).sum(),
            requests: requests
                .into_iter()
                .map(|((minute_ms, provider, reason), count)| MinuteRequests {
                    minute_ms,
                    provider: provider.to_owned(),
                    reason: reason.to_owned(),
                    count,
                })
                .collect(),
            spend: self
                .calls
                .iter()
                .filter(|((_, _, currency), _)| !currency.is_empty())
                .map(|((minute_ms, tenant, currency), sum)| MinuteSpend {
                    minute_ms: *minute_ms,
                    tenant: tenant.clone(),
                    currency: currency.clone(),
                    nanos: sum.nanos,
                    complete: !sum.incomplete,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(requests: &[(&str, &str)], cost: Option<(&str, u64, bool)>) -> TraceUsage {
        TraceUsage {
            requests: requests
                .iter()
                .map(|(p, r)| ((*p).to_owned(), (*r).to_owned()))
                .collect(),
            cost: cost.map(|(currency, nanos, complete)| TraceCost {
                currency: currency.into(),
                nanos,
                complete,
            }),
        }
    }

    #[test]
    fn a_batch_sums_by_minute_tenant_and_key() {
        let mut batch = UsageBatch::default();
        let m = 5 * MINUTE_MS;
        batch.add(
            "a",
            m + 1,
            &usage(&[("p", "first")], Some(("USD", 10, true))),
        );
        batch.add(
            "a",
            m + MINUTE_MS - 1,
            &usage(
                &[("p", "first"), ("p", "truncation")],
                Some(("USD", 5, false)),
            ),
        );
        batch.add("a", m + MINUTE_MS, &usage(&[("p", "first")], None));
        batch.add("b", m, &usage(&[], Some(("EUR", u64::MAX, true))));
        batch.add("b", m, &usage(&[], Some(("EUR", 1, true))));
        let a = &batch.calls[&(m, "a".into(), "USD".into())];
        assert_eq!((a.calls, a.nanos, a.incomplete), (2, 15, true));
        let unpriced = &batch.calls[&(m + MINUTE_MS, "a".into(), String::new())];
        assert_eq!((unpriced.calls, unpriced.nanos), (1, 0));
        assert_eq!(batch.calls[&(m, "b".into(), "EUR".into())].nanos, u64::MAX);
        assert_eq!(
            batch.requests[&(m, "a".into(), "p".into(), "first".into())],
            2
        );
        assert_eq!(batch.requests.len(), 3);
        assert_eq!(minute_of(m + 59_999), m);
    }

    #[test]
    fn a_batch_reads_back_as_a_run_log_sums_it() {
        let mut batch = UsageBatch::default();
        let m = 5 * MINUTE_MS;
        batch.add("b", m, &usage(&[("p", "first")], Some(("USD", 4, true))));
        batch.add(
            "a",
            m + 1,
            &usage(
                &[("p", "first"), ("q", "fallback")],
                Some(("USD", 10, false)),
            ),
        );
        batch.add("a", m + MINUTE_MS, &usage(&[("p", "first")], None));
        let sums = batch.sums();
        assert_eq!(sums.calls, 3);
        let requests: Vec<_> = sums
            .requests
            .iter()
            .map(|r| (r.minute_ms, r.provider.as_str(), r.reason.as_str(), r.count))
            .collect();
        assert_eq!(
            requests,
            [
                (m, "p", "first", 2),
                (m, "q", "fallback", 1),
                (m + MINUTE_MS, "p", "first", 1)
            ],
            "summed over tenants, in order"
        );
        let spend: Vec<_> = sums
            .spend
            .iter()
            .map(|s| (s.tenant.as_str(), s.nanos, s.complete))
            .collect();
        assert_eq!(
            spend,
            [("a", 10, false), ("b", 4, true)],
            "the unpriced call has no spend"
        );
    }
}

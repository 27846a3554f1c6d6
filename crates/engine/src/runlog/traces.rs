//! Call traces kept in the run log (`GET /v1/calls`): each call's trace as
//! its JSON, beside the few fields a listing filters on, each indexed, so
//! that a page of the newest calls a filter admits is read through an
//! index however many calls the log holds.

use super::RunLogError;
use super::usage::{MinuteSums, TraceUsage};
use crate::provider::BoxFuture;

/// One call's trace, as a run log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRow {
    /// The call id.
    pub id: String,
    /// The tenant that made it.
    pub tenant: String,
    /// When it started and ended, in ms since the Unix epoch.
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: u64,
    /// How many provider requests it sent.
    pub attempts: u32,
    /// What a listing finds it by: each a [`TraceTag`], written as
    /// [`TraceTag::key`] gives it.
    pub tags: Vec<String>,
    /// The trace as JSON, as `GET /v1/calls/{id}` answers it.
    pub json: String,
    /// What it adds to the sums of its minute.
    pub usage: TraceUsage,
}

/// A field a listing of traces filters on, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceTag<'a> {
    /// The tenant that made the call.
    Tenant(&'a str),
    /// `call`, `chat_completions`, `messages` or `run`.
    Endpoint(&'a str),
    /// `ok` or an error code.
    Outcome(&'a str),
    /// The pack run the call belongs to.
    Run(&'a str),
    /// A provider one of its requests went to.
    Provider(&'a str),
    /// A model one of its requests asked for, or the model name it routed.
    Model(&'a str),
}

impl TraceTag<'_> {
    /// The tag as the log stores it: a letter for the field, `:`, the value.
    pub fn key(&self) -> String {
        let (field, value) = match self {
            Self::Tenant(v) => ('t', v),
            Self::Endpoint(v) => ('e', v),
            Self::Outcome(v) => ('o', v),
            Self::Run(v) => ('r', v),
            Self::Provider(v) => ('p', v),
            Self::Model(v) => ('m', v),
        };
        format!("{field}:{value}")
    }
}

/// What a listing of traces keeps to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceQuery {
    /// Every tag a trace must carry ([`TraceTag::key`]s).
    pub tags: Vec<String>,
    /// Only calls of more than one attempt.
    pub retried: bool,
    /// Only calls started at or after this time (ms since the Unix epoch).
    pub since_ms: Option<u64>,
    /// Only calls kept before the call of this id (the previous page's
    /// last): a call of [`TraceQuery::owner`]'s, else the page is empty, as
    /// for an id nobody holds.
    pub before: Option<String>,
    /// Whose calls a `before` may name (`None`: anyone's, the admin's
    /// listing): a cursor is a place in the caller's own list.
    pub owner: Option<String>,
    /// The most traces a page holds.
    pub limit: usize,
}

/// A page of traces, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracePage {
    /// Each trace's id and JSON.
    pub traces: Vec<(String, String)>,
    /// Whether older traces match too.
    pub more: bool,
}

/// A value a query built by [`TraceQuery::select`] binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlParam<'a> {
    /// Text.
    Text(&'a str),
    /// An integer.
    Int(i64),
}

impl TraceQuery {
    /// The SQL of a page (one more row than `limit`, to tell whether there
    /// are more) over `traces` (`seq`, `id`, `started_ms`, `attempts`,
    /// `trace`) and `tags` (`tag`, `seq`, keyed by both), of the traces
    /// numbered in `seqs`; `mark(n)` writes the n-th placeholder (from 1).
    /// With a tag to keep to, the page is read through the tags' key from
    /// the newest down; without, through the traces' own.
    pub fn select(
        &self,
        traces: &str,
        tags: &str,
        seqs: std::ops::Range<i64>,
        mark: impl Fn(usize) -> String,
    ) -> (String, Vec<SqlParam<'_>>) {
        let mut params = Vec::new();
        let mut bind = |p| {
            params.push(p);
            mark(params.len())
        };
        // The page is read in the order of the key it is read through.
        let mut order = "c.seq";
        let mut sql = match self.tags.split_first() {
            Some((first, rest)) => {
                let mut sql = format!(
                    "SELECT c.id, c.trace FROM {tags} d JOIN {traces} c ON c.seq = d.seq \
                     WHERE d.tag = {} AND d.seq >= {} AND d.seq < {}",
                    bind(SqlParam::Text(first)),
                    bind(SqlParam::Int(seqs.start)),
                    bind(SqlParam::Int(seqs.end))
                );
                for tag in rest {
                    sql += &format!(
                        " AND EXISTS (SELECT 1 FROM {tags} x WHERE x.tag = {} AND x.seq = d.seq)",
                        bind(SqlParam::Text(tag))
                    );
                }
                order = "d.seq";
                sql
            }
            None => format!(
                "SELECT c.id, c.trace FROM {traces} c WHERE c.seq >= {} AND c.seq < {}",
                bind(SqlParam::Int(seqs.start)),
                bind(SqlParam::Int(seqs.end))
            ),
        };
        if self.retried {
            sql += " AND c.attempts > 1";
        }
        if let Some(since) = self.since_ms {
            sql += &format!(
                " AND c.started_ms >= {}",
                bind(SqlParam::Int(i64::try_from(since).unwrap_or(i64::MAX)))
            );
        }
        let rows = i64::try_from(self.limit.saturating_add(1)).unwrap_or(i64::MAX);
        sql += &format!(" ORDER BY {order} DESC LIMIT {}", bind(SqlParam::Int(rows)));
        (sql, params)
    }

    /// A page of the rows [`TraceQuery::select`]'s query read.
    pub fn page(&self, mut rows: Vec<(String, String)>) -> TracePage {
        let more = rows.len() > self.limit;
        rows.truncate(self.limit);
        TracePage { traces: rows, more }
    }
}

/// How far the order traces are kept in may stray from the order their
/// calls ended in: a batch's wait, and the clocks of hosts sharing a log.
pub const KEPT_ORDER_SLACK_MS: u64 = 5 * 60 * 1000;

/// Finds, by bisection over the traces' numbers, the first trace from
/// which a call may have started at or after `since_ms`: every trace
/// numbered before it ended more than [`KEPT_ORDER_SLACK_MS`] before
/// `since_ms`, so `?since=` reads only the traces after it rather than
/// every older one. The reads are the caller's: [`SinceFloor::probe`] says
/// which number to look up (the first trace at or after it), and
/// [`SinceFloor::found`] takes what was there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinceFloor {
    lo: i64,
    hi: i64,
    /// Traces that ended before this are before the floor.
    ended_before: u64,
    probed: i64,
}

impl SinceFloor {
    /// A search among the traces numbered `first..=last`.
    pub fn new(first: i64, last: i64, since_ms: u64) -> Self {
        Self {
            lo: first,
            hi: last.saturating_add(1),
            ended_before: since_ms.saturating_sub(KEPT_ORDER_SLACK_MS),
            probed: first,
        }
    }

    /// The number to look up next, or `None` once the floor is found.
    pub fn probe(&mut self) -> Option<i64> {
        (self.lo < self.hi).then(|| {
            self.probed = self.lo + (self.hi - self.lo) / 2;
            self.probed
        })
    }

    /// The first trace at or after the probe: its number and end.
    pub fn found(&mut self, seq: i64, ended_ms: u64) {
        if ended_ms < self.ended_before {
            self.lo = seq.max(self.probed) + 1;
        } else {
            self.hi = self.probed;
        }
    }

    /// The floor: the first number a page with `since` reads.
    pub fn floor(&self) -> i64 {
        self.lo
    }
}

/// Where a run log keeps call traces.
pub trait TraceLog: Send + Sync {
    /// Keeps `traces`, in one transaction, in the order given (a listing
    /// answers the last kept first).
    fn put_traces<'a>(&'a self, traces: &'a [TraceRow]) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// The JSON of call `id`, when `tenant` (`None`: the admin, any) made it.
    fn get_trace<'a>(
        &'a self,
        tenant: Option<&'a str>,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, RunLogError>>;

    /// The newest traces `query` admits; an unknown `before` gives none.
    fn list_traces<'a>(
        &'a self,
        query: &'a TraceQuery,
    ) -> BoxFuture<'a, Result<TracePage, RunLogError>>;

    /// The sums of the minutes from the one `since_ms` starts (a minute's
    /// start) on, of `tenant`'s calls (`None`: every tenant's): requests
    /// summed over tenants by minute, provider and reason; spend by
    /// minute, tenant and currency; both in that order.
    fn minute_sums<'a>(
        &'a self,
        tenant: Option<&'a str>,
        since_ms: u64,
    ) -> BoxFuture<'a, Result<MinuteSums, RunLogError>>;
}

#[cfg(test)]
mod tests {
    use super::{KEPT_ORDER_SLACK_MS, SinceFloor, TraceTag};

    /// The floor over traces numbered from 10 in steps of 3 (gaps, as
    /// pruned or refused rows leave), ending at the given times.
    fn floor(ended: &[u64], since_ms: u64) -> (i64, usize) {
        let seqs: Vec<i64> = (0..ended.len() as i64).map(|i| 10 + 3 * i).collect();
        let last = *seqs.last().unwrap();
        let mut search = SinceFloor::new(10, last, since_ms);
        let mut probes = 0;
        while let Some(p) = search.probe() {
            probes += 1;
            let i = seqs.iter().position(|s| *s >= p).unwrap();
            search.found(seqs[i], ended[i]);
        }
        (search.floor(), probes)
    }

    #[test]
    fn since_reads_from_the_first_trace_that_may_have_started_after_it() {
        let slack = KEPT_ORDER_SLACK_MS;
        let ended: Vec<u64> = (0..1000).map(|i| slack + i * 1000).collect();
        // Traces ending before since - slack are skipped, none after.
        let (first, probes) = floor(&ended, 2 * slack + 500_000);
        let i = ended.iter().position(|e| *e >= slack + 500_000).unwrap();
        assert!(
            first > 10 + 3 * (i as i64 - 1) && first <= 10 + 3 * i as i64,
            "{first}"
        );
        assert!(probes <= 13, "a bisection, not a walk: {probes}");
        // Before every trace: from the first; past every one: past the last.
        assert_eq!(floor(&ended, 0).0, 10);
        assert_eq!(floor(&ended, u64::MAX).0, 10 + 3 * 999 + 1);
        // Out of order within the slack, nothing that may match is skipped.
        let jumbled = [slack + 5, slack + 1, slack + 9, slack + 2, slack + 20];
        assert_eq!(floor(&jumbled, slack + 1).0, 10);
    }

    #[test]
    fn each_field_has_a_letter_of_its_own() {
        let tags = [
            TraceTag::Tenant("x"),
            TraceTag::Endpoint("x"),
            TraceTag::Outcome("x"),
            TraceTag::Run("x"),
            TraceTag::Provider("x"),
            TraceTag::Model("x"),
        ];
        let keys: std::collections::BTreeSet<String> = tags.iter().map(TraceTag::key).collect();
        assert_eq!(keys.len(), tags.len());
        assert_eq!(TraceTag::Model("a/b:c").key(), "m:a/b:c");
    }
}

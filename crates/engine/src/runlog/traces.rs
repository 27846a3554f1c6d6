//! Call traces kept in the run log (`GET /v1/calls`): each call's trace as
//! its JSON, beside the few fields a listing filters on, each indexed, so
//! that a page of the newest calls a filter admits is read through an
//! index however many calls the log holds.

use super::RunLogError;
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
    /// Only calls kept before the call of this id (the previous page's last).
    pub before: Option<String>,
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
    /// `trace`) and `tags` (`tag`, `seq`, keyed by both), before the trace
    /// numbered `before_seq`; `mark(n)` writes the n-th placeholder (from 1).
    /// With a tag to keep to, the page is read through the tags' key from
    /// the newest down; without, through the traces' own.
    pub fn select(
        &self,
        traces: &str,
        tags: &str,
        before_seq: i64,
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
                     WHERE d.tag = {} AND d.seq < {}",
                    bind(SqlParam::Text(first)),
                    bind(SqlParam::Int(before_seq))
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
                "SELECT c.id, c.trace FROM {traces} c WHERE c.seq < {}",
                bind(SqlParam::Int(before_seq))
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
}

#[cfg(test)]
mod tests {
    use super::TraceTag;

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

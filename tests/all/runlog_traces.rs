//! Call traces in each run-log backend (issue 35), under the `TraceLog`
//! trait: kept in order and listed newest first, filtered by every tag a
//! trace carries (several at once), by retries and start time, paged by
//! the last id of a page, read by id only by their tenant or the admin, a
//! repeated write keeping the first, and pruned with their tags; and the
//! sums per minute kept beside them (`GET /v1/usage`).

use callai_engine::RunLog;
use callai_engine::runlog::{
    MINUTE_MS, MinuteRequests, MinuteSpend, TraceCost, TraceLog, TraceQuery, TraceRow, TraceTag,
    TraceUsage,
};
use callai_tests::runlog_backends::Backend;
use std::sync::Arc;

fn traces(log: &Arc<dyn RunLog>) -> &dyn TraceLog {
    log.traces().expect("every backend keeps traces")
}

/// Call `n` of `tenant`, to `provider`, ending at `n` seconds.
fn row(n: u64, tenant: &str, provider: &str, attempts: u32) -> TraceRow {
    TraceRow {
        id: format!("call_{n}"),
        tenant: tenant.into(),
        started_ms: n * 1000 - 500,
        ended_ms: n * 1000,
        attempts,
        tags: vec![
            TraceTag::Tenant(tenant).key(),
            TraceTag::Provider(provider).key(),
            TraceTag::Outcome("ok").key(),
        ],
        json: format!(r#"{{"id":"call_{n}","tenant":"{tenant}"}}"#),
        usage: TraceUsage {
            requests: (0..attempts)
                .map(|i| {
                    let reason = if i == 0 { "first" } else { "truncation" };
                    (provider.to_owned(), reason.to_owned())
                })
                .collect(),
            cost: None,
        },
    }
}

fn query(tags: &[TraceTag<'_>], limit: usize) -> TraceQuery {
    TraceQuery {
        tags: tags.iter().map(TraceTag::key).collect(),
        limit,
        ..TraceQuery::default()
    }
}

async fn ids(log: &dyn TraceLog, q: &TraceQuery) -> (Vec<String>, bool) {
    let page = log.list_traces(q).await.unwrap();
    (
        page.traces.into_iter().map(|(id, _)| id).collect(),
        page.more,
    )
}

fn named(ids: &[u64]) -> Vec<String> {
    ids.iter().map(|n| format!("call_{n}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_listed_newest_first_by_every_filter_and_paged() {
    for backend in Backend::all() {
        let log = backend.open().await;
        let t = traces(&log);
        let rows = [
            row(1, "acme", "openai", 1),
            row(2, "umbrella", "openai", 2),
            row(3, "acme", "anthropic", 3),
        ];
        t.put_traces(&rows[..2]).await.unwrap();
        t.put_traces(&rows[2..]).await.unwrap();
        let name = backend.name();
        assert_eq!(
            ids(t, &query(&[], 10)).await,
            (named(&[3, 2, 1]), false),
            "{name}"
        );
        let acme = TraceTag::Tenant("acme");
        assert_eq!(
            ids(t, &query(&[acme], 10)).await,
            (named(&[3, 1]), false),
            "{name}"
        );
        let both = [acme, TraceTag::Provider("openai")];
        assert_eq!(
            ids(t, &query(&both, 10)).await,
            (named(&[1]), false),
            "{name}"
        );
        let none = [acme, TraceTag::Outcome("rate_limited")];
        assert_eq!(ids(t, &query(&none, 10)).await, (vec![], false), "{name}");
        let retried = TraceQuery {
            retried: true,
            ..query(&[], 10)
        };
        assert_eq!(ids(t, &retried).await, (named(&[3, 2]), false), "{name}");
        let since = TraceQuery {
            since_ms: Some(1500),
            ..query(&[], 10)
        };
        assert_eq!(ids(t, &since).await, (named(&[3, 2]), false), "{name}");
        // Paged two at a time, the last id of one page the next's start.
        assert_eq!(
            ids(t, &query(&[], 2)).await,
            (named(&[3, 2]), true),
            "{name}"
        );
        let next = TraceQuery {
            before: Some("call_2".into()),
            ..query(&[], 2)
        };
        assert_eq!(ids(t, &next).await, (named(&[1]), false), "{name}");
        let unknown = TraceQuery {
            before: Some("call_404".into()),
            ..query(&[], 2)
        };
        assert_eq!(ids(t, &unknown).await, (vec![], false), "{name}");
        // By id: its tenant and the admin read it; another tenant does not.
        let json = t.get_trace(Some("acme"), "call_3").await.unwrap();
        assert_eq!(json.as_deref(), Some(rows[2].json.as_str()), "{name}");
        assert!(
            t.get_trace(None, "call_3").await.unwrap().is_some(),
            "{name}"
        );
        let other = t.get_trace(Some("umbrella"), "call_3").await.unwrap();
        assert_eq!(other, None, "{name}");
        // A repeated write of an id keeps the first trace, and adds no tag.
        let mut again = row(3, "umbrella", "mistral", 9);
        again.json = "{}".into();
        t.put_traces(&[again]).await.unwrap();
        let json = t.get_trace(None, "call_3").await.unwrap();
        assert_eq!(json.as_deref(), Some(rows[2].json.as_str()), "{name}");
        let mistral = query(&[TraceTag::Provider("mistral")], 10);
        assert_eq!(ids(t, &mistral).await, (vec![], false), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn since_reads_from_the_right_trace_on_however_long_a_log() {
    for backend in Backend::all() {
        let log = backend.open().await;
        let t = traces(&log);
        // A call a minute for 100 minutes, started half a second before
        // its end; one batch of 60, then one of 40.
        let rows: Vec<TraceRow> = (1..=100)
            .map(|n| {
                let mut r = row(n, "acme", "openai", 1);
                (r.started_ms, r.ended_ms) = (n * 60_000 - 500, n * 60_000);
                r
            })
            .collect();
        t.put_traces(&rows[..60]).await.unwrap();
        t.put_traces(&rows[60..]).await.unwrap();
        let name = backend.name();
        for since_ms in [0, 59_500, 1_200_000, 1_199_499, 5_999_500, 6_000_000] {
            let want: Vec<String> = rows
                .iter()
                .rev()
                .filter(|r| r.started_ms >= since_ms)
                .map(|r| r.id.clone())
                .collect();
            for tags in [vec![], vec![TraceTag::Tenant("acme")]] {
                let q = TraceQuery {
                    since_ms: Some(since_ms),
                    ..query(&tags, 500)
                };
                assert_eq!(ids(t, &q).await, (want.clone(), false), "{name} {since_ms}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_the_traces_that_ended_before_with_their_tags() {
    for backend in Backend::all() {
        let log = backend.open().await;
        let t = traces(&log);
        let rows: Vec<TraceRow> = (1..=5).map(|n| row(n, "acme", "openai", 1)).collect();
        t.put_traces(&rows).await.unwrap();
        let name = backend.name();
        assert_eq!(
            backend.number("SELECT count(*) FROM call_trace_tags"),
            15,
            "{name}"
        );
        // Calls 1 and 2 ended before 2.5 s.
        let pruned = log.prune(2500).await.unwrap();
        assert_eq!(pruned.traces, 2, "{name}");
        let acme = query(&[TraceTag::Tenant("acme")], 10);
        assert_eq!(ids(t, &acme).await, (named(&[5, 4, 3]), false), "{name}");
        assert_eq!(
            backend.number("SELECT count(*) FROM call_trace_tags"),
            9,
            "{name}"
        );
        assert_eq!(log.prune(2500).await.unwrap().traces, 0, "{name}");
        // Past the newest, every trace goes.
        assert_eq!(
            log.prune(4_000_000_000_000).await.unwrap().traces,
            3,
            "{name}"
        );
        assert_eq!(
            backend.number("SELECT count(*) FROM call_traces"),
            0,
            "{name}"
        );
    }
}

/// Call `n` of `tenant` started at `started_ms`, of `attempts` requests
/// to `provider`, costing `nanos` USD-billionths (complete or not).
fn priced(n: u64, tenant: &str, started_ms: u64, attempts: u32, cost: (u64, bool)) -> TraceRow {
    let mut row = row(n, tenant, "openai", attempts);
    row.started_ms = started_ms;
    row.ended_ms = started_ms + 10;
    row.usage.cost = Some(TraceCost {
        currency: "USD".into(),
        nanos: cost.0,
        complete: cost.1,
    });
    row
}

fn requests(minute_ms: u64, reason: &str, count: u64) -> MinuteRequests {
    MinuteRequests {
        minute_ms,
        provider: "openai".into(),
        reason: reason.into(),
        count,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minutes_are_summed_as_traces_are_written_and_pruned_with_them() {
    let m = 1_000 * MINUTE_MS;
    for backend in Backend::all() {
        let name = backend.name();
        let log = backend.open().await;
        let t = traces(&log);
        // Two batches into the same minutes: the sums add up across them.
        t.put_traces(&[
            priced(1, "acme", m + 5, 2, (1_500, true)),
            priced(2, "umbrella", m + 59_999, 1, (7, false)),
        ])
        .await
        .unwrap();
        let mut unpriced = row(3, "acme", "openai", 1);
        unpriced.started_ms = m + MINUTE_MS;
        unpriced.ended_ms = m + MINUTE_MS + 10;
        t.put_traces(&[priced(4, "acme", m + 30_000, 1, (500, false)), unpriced])
            .await
            .unwrap();
        // A batch written again (its first write had landed) adds nothing.
        t.put_traces(&[priced(4, "acme", m + 30_000, 1, (500, false))])
            .await
            .unwrap();

        let all = t.minute_sums(None, m).await.unwrap();
        assert_eq!(all.calls, 4, "{name}");
        assert_eq!(
            all.requests,
            [
                requests(m, "first", 3),
                requests(m, "truncation", 1),
                requests(m + MINUTE_MS, "first", 1)
            ],
            "{name}"
        );
        let spend = |tenant: &str, nanos, complete| MinuteSpend {
            minute_ms: m,
            tenant: tenant.into(),
            currency: "USD".into(),
            nanos,
            complete,
        };
        assert_eq!(
            all.spend,
            [spend("acme", 2_000, false), spend("umbrella", 7, false)],
            "{name}: the unpriced call counts, costs nothing"
        );
        let acme = t.minute_sums(Some("acme"), m).await.unwrap();
        assert_eq!((acme.calls, acme.spend.len()), (3, 1), "{name}");
        assert_eq!(acme.requests[0].count, 2, "{name}: umbrella's left out");
        let later = t.minute_sums(None, m + MINUTE_MS).await.unwrap();
        assert_eq!(later.calls, 1, "{name}");
        assert_eq!(later.requests, [requests(m + MINUTE_MS, "first", 1)]);
        assert!(later.spend.is_empty(), "{name}");
        // Minutes that ended before the prune's time go with their calls.
        log.prune(m + MINUTE_MS + 30).await.unwrap();
        let kept = t.minute_sums(None, 0).await.unwrap();
        assert_eq!(kept.calls, 1, "{name}");
        assert!(kept.spend.is_empty(), "{name}");
        assert_eq!(
            backend.number("SELECT count(*) FROM usage_requests"),
            1,
            "{name}"
        );
    }
}

/// A page filtered by a tag is read through the tags' key, never by a scan
/// of every trace (SQLite's plan says which; PostgreSQL's planner picks by
/// the table's size, so its plan is measured by the benchmark instead).
#[test]
fn a_filtered_page_is_an_index_read_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    drop(callai_runlog_sqlite::SqliteRunLog::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let q = TraceQuery {
        retried: true,
        since_ms: Some(1),
        ..query(&[TraceTag::Tenant("acme"), TraceTag::Model("m")], 50)
    };
    for q in [q.clone(), TraceQuery { tags: vec![], ..q }] {
        let (sql, _) = q.select("call_traces", "call_trace_tags", 0..i64::MAX, |n| {
            format!("?{n}")
        });
        let mut plan = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Unbound, each parameter is NULL: the plan does not depend on it.
        let unbound = std::iter::repeat_n(rusqlite::types::Null, plan.parameter_count());
        let steps: Vec<String> = plan
            .query_map(rusqlite::params_from_iter(unbound), |r| r.get(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let text = steps.join("\n");
        assert!(!text.contains("SCAN"), "{sql}\n{text}");
        assert!(
            !text.contains("TEMP B-TREE"),
            "sorted after reading: {sql}\n{text}"
        );
    }
}

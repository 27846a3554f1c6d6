//! One run-log suite, through the `RunLog` trait, on both backends: the
//! SQLite file and PostgreSQL (a throwaway cluster). Round trips, refusals,
//! fences, resume, leases and takeover, concurrent writers, corruption
//! (a database that is not a run log, or a newer one: runlog_migration.rs).

use callai_engine::RunLogError;
use callai_engine::events::Event;
use callai_engine::runlog::{
    BeginRun, Entry, ExistingRun, Lease, Outcome, RecordedCall, RunSeed, RunSpec, RunStatus,
};
use callai_engine::wire::{Attempts, CallResult};
use callai_tests::runlog_backends::Backend;
use std::time::Duration;

const SEED: RunSeed = RunSeed {
    seed: u64::MAX - 7,
    clock_ms: 1_800_000_000_000,
};

pub(crate) fn begin<'a>(
    run_id: &'a str,
    existing: ExistingRun,
    spec: Option<&'a RunSpec>,
    lease: Option<Lease<'a>>,
) -> BeginRun<'a> {
    BeginRun {
        run: run_id.into(),
        node_id: "n",
        seed: SEED,
        existing,
        spec,
        lease,
    }
}

pub(crate) fn call(index: u32) -> RecordedCall {
    RecordedCall {
        node_id: "n".into(),
        index,
        entry: Entry::Json,
        request: serde_json::json!({"i": index}),
        outcome: Outcome::Result(CallResult {
            content: Some(format!("answer {index}")),
            attempts: Some(Attempts {
                count: 2,
                output_tokens: Some(40),
                usage_complete: true,
                structured_output: None,
            }),
            ..CallResult::default()
        }),
        events: vec![event(index)],
    }
}

pub(crate) fn event(i: u32) -> Event {
    Event::RecoveryApplied {
        node_id: "n".into(),
        path: format!("direct-{i}"),
    }
}

fn lease(owner: &str, ms: u64) -> Lease<'_> {
    Lease {
        owner,
        duration: Duration::from_millis(ms),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_round_trips_with_its_spec_seed_and_event_times() {
    for b in Backend::all() {
        let log = b.open().await;
        let spec = RunSpec {
            pack: "p".into(),
            sha256: "ab".repeat(32),
            input: "{\"x\": \"é\"}".into(),
            script: Some("[]".into()),
            tenant: None,
        };
        let f = log
            .begin(&begin("r", ExistingRun::Refuse, Some(&spec), None))
            .await
            .unwrap();
        log.commit_call("r".into(), f, &call(0), &[event(100), event(0)])
            .await
            .unwrap();
        log.commit_call("r".into(), f, &call(1), &[event(1)])
            .await
            .unwrap();
        log.finish(
            "r".into(),
            f,
            &[event(2)],
            RunStatus::Ok,
            "{\"done\": true}",
        )
        .await
        .unwrap();
        // A second handle reads what the first wrote.
        let run = b.open().await.load("r".into()).await.unwrap();
        assert_eq!(run.calls, vec![call(0), call(1)], "{}", b.name());
        assert_eq!(run.events, vec![event(100), event(0), event(1), event(2)]);
        assert!(
            run.event_times.iter().all(|&t| t > 1_700_000_000_000),
            "{:?}",
            run.event_times
        );
        assert_eq!(run.status, RunStatus::Ok);
        assert_eq!(run.output.as_deref(), Some("{\"done\": true}"));
        assert_eq!(
            run.seed,
            SEED,
            "{}: the seed round-trips bit for bit",
            b.name()
        );
        assert_eq!(run.spec.as_ref(), Some(&spec));
        assert!(!run.durable);
        assert!(matches!(
            log.load("nope".into()).await,
            Err(RunLogError::NoSuchRun(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_run_is_refused_unless_overwritten_which_fences_the_old_recorder() {
    for b in Backend::all() {
        let log = b.open().await;
        let first = log
            .begin(&begin("r", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        log.commit_call("r".into(), first, &call(0), &[])
            .await
            .unwrap();
        let again = log
            .begin(&begin("r", ExistingRun::Refuse, None, None))
            .await;
        assert!(
            matches!(again, Err(RunLogError::RunExists(_))),
            "{}: {again:?}",
            b.name()
        );
        let second = log
            .begin(&begin("r", ExistingRun::Overwrite, None, None))
            .await
            .unwrap();
        assert!(second > first);
        let stale = log.commit_call("r".into(), first, &call(0), &[]).await;
        assert!(
            matches!(stale, Err(RunLogError::Fenced(_))),
            "{}: {stale:?}",
            b.name()
        );
        log.commit_call("r".into(), second, &call(0), &[])
            .await
            .unwrap();
        let run = log.load("r".into()).await.unwrap();
        assert_eq!(run.calls.len(), 1, "the overwritten run's calls are gone");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_takes_a_stopped_run_over_and_refuses_a_finished_one() {
    for b in Backend::all() {
        let log = b.open().await;
        let old = log
            .begin(&begin("r", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        log.commit_call("r".into(), old, &call(0), &[event(0)])
            .await
            .unwrap();
        log.commit_call("r".into(), old, &call(1), &[event(1)])
            .await
            .unwrap();
        let (fence, run) = log.resume("r".into(), None).await.unwrap();
        assert!(fence > old);
        assert_eq!(
            (run.status, run.calls.len(), run.events.len()),
            (RunStatus::Running, 2, 2)
        );
        // The recorder that was interrupted (or still thinks it owns the run)
        // can no longer write.
        let stale = log.commit_call("r".into(), old, &call(2), &[]).await;
        assert!(matches!(stale, Err(RunLogError::Fenced(_))), "{}", b.name());
        log.commit_call("r".into(), fence, &call(2), &[event(2)])
            .await
            .unwrap();
        log.finish("r".into(), fence, &[], RunStatus::Ok, "out")
            .await
            .unwrap();
        let done = log.resume("r".into(), None).await;
        assert!(
            matches!(done, Err(RunLogError::Finished(_, "ok"))),
            "{}: {done:?}",
            b.name()
        );
        assert!(matches!(
            log.resume("nope".into(), None).await,
            Err(RunLogError::NoSuchRun(_))
        ));
        assert_eq!(log.load("r".into()).await.unwrap().calls.len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_is_taken_over_once_and_the_old_owner_is_fenced() {
    for b in Backend::all() {
        let log = b.open().await;
        let spec = RunSpec {
            pack: "p".into(),
            sha256: "00".repeat(32),
            input: "1".into(),
            script: None,
            tenant: None,
        };
        let a = log
            .begin(&begin(
                "d",
                ExistingRun::Refuse,
                Some(&spec),
                Some(lease("host-a", 300)),
            ))
            .await
            .unwrap();
        log.commit_call("d".into(), a, &call(0), &[]).await.unwrap();
        log.renew("d".into(), a, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(
            log.claim(lease("host-b", 5000)).await.unwrap().is_none(),
            "{}: the lease holds",
            b.name()
        );
        // A run that is not durable is never claimed.
        log.begin(&begin("plain", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(450)).await;
        let (bf, run) = log
            .claim(lease("host-b", 5000))
            .await
            .unwrap()
            .expect("lapsed");
        assert_eq!((run.run_id.as_str(), run.calls.len()), ("d", 1));
        assert!(run.durable && bf > a);
        assert_eq!(run.spec, Some(spec.clone()));
        assert!(
            log.claim(lease("host-c", 5000)).await.unwrap().is_none(),
            "claimed once"
        );
        // Host A wakes up: it cannot renew nor commit.
        let renew = log.renew("d".into(), a, Duration::from_millis(300)).await;
        assert!(matches!(renew, Err(RunLogError::Fenced(_))), "{}", b.name());
        assert!(matches!(
            log.commit_call("d".into(), a, &call(1), &[]).await,
            Err(RunLogError::Fenced(_))
        ));
        log.commit_call("d".into(), bf, &call(1), &[])
            .await
            .unwrap();
        // Released, the run is free at once.
        log.release("d".into(), bf).await.unwrap();
        let (cf, _) = log
            .claim(lease("host-c", 5000))
            .await
            .unwrap()
            .expect("released");
        assert!(cf > bf);
        log.finish("d".into(), cf, &[], RunStatus::Ok, "x")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            log.claim(lease("host-d", 1)).await.unwrap().is_none(),
            "a finished run is not claimed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_claiming_at_once_each_get_different_runs() {
    for b in Backend::all() {
        let log = b.open().await;
        let ids: Vec<String> = (0..6).map(|i| format!("d{i}")).collect();
        for id in &ids {
            let f = log
                .begin(&begin(
                    id,
                    ExistingRun::Refuse,
                    None,
                    Some(lease("dead", 1)),
                ))
                .await
                .unwrap();
            log.commit_call(id.into(), f, &call(0), &[]).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut claimers = Vec::new();
        for h in 0..4 {
            let log = log.clone();
            claimers.push(tokio::spawn(async move {
                let owner = format!("host-{h}");
                let mut mine = Vec::new();
                while let Some((_, run)) = log.claim(lease(&owner, 60_000)).await.unwrap() {
                    mine.push(run.run_id);
                }
                mine
            }));
        }
        let mut claimed = Vec::new();
        for c in claimers {
            claimed.extend(c.await.unwrap());
        }
        claimed.sort();
        assert_eq!(claimed, ids, "{}: every run claimed exactly once", b.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_recorders_keep_every_run_whole() {
    for b in Backend::all() {
        let log = b.open().await;
        let mut tasks = Vec::new();
        for r in 0..8 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("c{r}");
                let f = log
                    .begin(&begin(&id, ExistingRun::Refuse, None, None))
                    .await
                    .unwrap();
                for i in 0..10 {
                    log.commit_call((&id).into(), f, &call(i), &[event(i)])
                        .await
                        .unwrap();
                }
                log.finish((&id).into(), f, &[], RunStatus::Ok, "")
                    .await
                    .unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        for r in 0..8 {
            let run = log.load(format!("c{r}").as_str().into()).await.unwrap();
            assert_eq!(
                run.calls,
                (0..10).map(call).collect::<Vec<_>>(),
                "{}",
                b.name()
            );
            assert_eq!(run.events, (0..10).map(event).collect::<Vec<_>>());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_record_is_a_corrupt_log_naming_the_call() {
    for b in Backend::all() {
        let log = b.open().await;
        let f = log
            .begin(&begin("r", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        log.commit_call("r".into(), f, &call(0), &[]).await.unwrap();
        log.commit_call("r".into(), f, &call(1), &[]).await.unwrap();
        b.tamper(
            "r",
            1,
            "{\"result\": {\"attempts\": {\"count\": 0, \"usageComplete\": true}}}",
        );
        let e = log.load("r".into()).await.unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, RunLogError::Corrupt { .. }),
            "{}: {e:?}",
            b.name()
        );
        assert!(
            text.contains("call 1") && text.contains("impossible"),
            "{text}"
        );
        b.tamper("r", 0, "not json");
        let e = log.resume("r".into(), None).await.unwrap_err();
        assert!(e.to_string().contains("call 0"), "{}: {e}", b.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_run_that_cannot_be_read_is_failed_once_and_the_others_go_on() {
    // Issue 22, item 7: one unreadable call row made every claim fail, so a
    // healthy lapsed run behind it was never taken over.
    for b in Backend::all() {
        let log = b.open().await;
        let spec = RunSpec {
            pack: "p".into(),
            sha256: "00".repeat(32),
            input: "1".into(),
            script: None,
            tenant: None,
        };
        for (run_id, ms) in [("sick", 100), ("well", 300)] {
            let f = log
                .begin(&begin(
                    run_id,
                    ExistingRun::Refuse,
                    Some(&spec),
                    Some(lease("host-a", ms)),
                ))
                .await
                .unwrap();
            log.commit_call(run_id.into(), f, &call(0), &[])
                .await
                .unwrap();
        }
        b.tamper("sick", 0, "not json");
        tokio::time::sleep(Duration::from_millis(450)).await;
        let (_, run) = log
            .claim(lease("host-b", 60_000))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", b.name()))
            .expect("the healthy run is claimed");
        assert_eq!(run.run_id, "well", "{}", b.name());
        let (status, output) = b.status("sick");
        assert_eq!(status, "failed", "{}", b.name());
        assert!(
            output.contains("cannot be resumed") && output.contains("call 0"),
            "{}: {output}",
            b.name()
        );
        assert!(
            log.claim(lease("host-c", 60_000)).await.unwrap().is_none(),
            "{}: the unreadable run is failed once, never claimed again",
            b.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_bytes_are_kept_by_hash() {
    for b in Backend::all() {
        let log = b.open().await;
        let bytes: Vec<u8> = (0..=255).cycle().take(100_000).collect();
        log.put_pack("h1", &bytes).await.unwrap();
        log.put_pack("h1", &bytes).await.unwrap();
        assert_eq!(
            log.get_pack("h1").await.unwrap(),
            Some(bytes),
            "{}",
            b.name()
        );
        assert_eq!(log.get_pack("h2").await.unwrap(), None);
    }
}

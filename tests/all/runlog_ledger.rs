//! The budget ledger and the idempotency keys of each run-log backend
//! (issues 24 and 31), under the `Ledger` trait: concurrent reservations
//! never pass a limit, a chunk takes at most half of what is left and gives
//! back what no call of it holds, a refusal says when a chunk may still
//! give room back, a charge goes to the window its reservation was made
//! in, a lapsed reservation is charged what it held (never released), and
//! keys are claimed, waited on, answered, refused with another body and
//! released.

use callai_engine::RunLog;
use callai_engine::budget::{
    KeyClaim, KeyState, Ledger, Limits, Reservation, ReserveRequest, Reserved, Spend, StoredAnswer,
    Window,
};
use callai_tests::runlog_backends::Backend;
use std::sync::Arc;
use std::time::Duration;

fn spend(requests: u64, output_tokens: u64) -> Spend {
    Spend {
        requests,
        output_tokens,
        input_tokens: 0,
        cost: 0,
    }
}

fn request<'a>(tenant: &'a str, need: Spend, ttl: Duration) -> ReserveRequest<'a> {
    ReserveRequest {
        tenant,
        window: Window::Hour,
        limits: Limits {
            requests: Some(100),
            output_tokens: Some(1_000_000),
            input_tokens: None,
            cost: None,
        },
        need,
        calls: 1,
        owner: "test-host",
        ttl,
    }
}

fn ledger(log: &Arc<dyn RunLog>) -> &dyn Ledger {
    log.ledger().expect("every backend keeps budgets")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_reservations_never_pass_a_limit() {
    for backend in Backend::all() {
        // Two handles, as two hosts have (PostgreSQL: two pools).
        let logs = [backend.open().await, backend.open().await];
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let log = logs[i % 2].clone();
                tokio::spawn(async move {
                    let r = request("t", spend(3, 10), Duration::from_secs(60));
                    ledger(&log).reserve(&r).await.unwrap()
                })
            })
            .collect();
        let mut admitted = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Reserved::Admitted {
                    reservation,
                    state,
                    calls,
                } => {
                    assert_eq!(calls, 1, "{}", backend.name());
                    assert!(
                        state.used().requests <= 100,
                        "{}: {state:?}",
                        backend.name()
                    );
                    admitted.push(reservation);
                }
                Reserved::Refused {
                    key,
                    left,
                    needed,
                    room,
                    pending,
                } => {
                    assert_eq!((key, needed), ("requests", 3), "{}", backend.name());
                    assert_eq!(room.requests, Some(left), "{}", backend.name());
                    assert!(!pending, "{}: no chunk was asked for", backend.name());
                    assert!(left < 3, "{}: refused with {left} left", backend.name());
                }
            }
        }
        assert_eq!(admitted.len(), 33, "{}: 33 × 3 fit in 100", backend.name());
        let state = ledger(&logs[0]).window("t", Window::Hour).await.unwrap();
        assert_eq!(state.reserved, spend(99, 330), "{}", backend.name());
        for r in admitted {
            ledger(&logs[1]).settle("t", r, spend(1, 4)).await.unwrap();
        }
        let state = ledger(&logs[0]).window("t", Window::Hour).await.unwrap();
        assert_eq!(
            (state.spent, state.reserved),
            (spend(33, 132), Spend::default()),
            "{}",
            backend.name()
        );
        // Another tenant's window is its own.
        let other = ledger(&logs[0]).window("u", Window::Hour).await.unwrap();
        assert_eq!(other.spent, Spend::default());
    }
}

/// Issue 35 #5: money is a fourth key, kept in billionths: reserved
/// beside the tokens, refused naming `cost`, charged what the call spent,
/// and charged what it held when its host dies holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn money_is_reserved_refused_charged_and_lapsed_as_tokens_are() {
    for backend in Backend::all() {
        let name = backend.name();
        let log = backend.open().await;
        let money = |cost: u64| Spend {
            requests: 1,
            cost,
            ..Spend::default()
        };
        let budget = |need: Spend, ttl: Duration| ReserveRequest {
            limits: Limits {
                cost: Some(1_000_000_000),
                ..Limits::default()
            },
            ..request("m", need, ttl)
        };
        let r = budget(money(600_000_000), Duration::from_secs(60));
        let Reserved::Admitted { reservation, .. } = ledger(&log).reserve(&r).await.unwrap() else {
            panic!("{name}: 0.6 of 1.0 fits");
        };
        let refused = ledger(&log).reserve(&r).await.unwrap();
        assert!(
            matches!(
                refused,
                Reserved::Refused {
                    key: "cost",
                    left: 400_000_000,
                    needed: 600_000_000,
                    ..
                }
            ),
            "{name}: {refused:?}"
        );
        let state = ledger(&log)
            .settle("m", reservation, money(250_000_000))
            .await
            .unwrap();
        assert_eq!(
            (state.spent.cost, state.reserved.cost),
            (250_000_000, 0),
            "{name}"
        );
        // A reservation that lapses is charged what it held.
        let short = budget(money(700_000_000), Duration::from_millis(1));
        let Reserved::Admitted { .. } = ledger(&log).reserve(&short).await.unwrap() else {
            panic!("{name}: 0.25 + 0.7 fits");
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let state = ledger(&log).window("m", Window::Hour).await.unwrap();
        assert_eq!(
            (state.spent.cost, state.reserved.cost),
            (950_000_000, 0),
            "{name}: lapsed, charged in full"
        );
        assert_eq!(
            backend.number("SELECT spent_cost FROM budget_windows WHERE tenant = 'm'"),
            950_000_000,
            "{name}: in the table's own column"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_goes_to_the_window_its_reservation_was_made_in() {
    for backend in Backend::all() {
        let log = backend.open().await;
        let r = request("t", spend(2, 100), Duration::from_secs(60));
        let Reserved::Admitted { reservation, .. } = ledger(&log).reserve(&r).await.unwrap() else {
            panic!("{}: a first reservation fits", backend.name());
        };
        // As if it had been made an hour ago, in the window before this one.
        let before = reservation.window_ms - 3_600_000;
        backend.execute(&format!(
            "UPDATE budget_reservations SET window_ms = {before};
             UPDATE budget_windows SET window_ms = {before};"
        ));
        ledger(&log)
            .settle("t", reservation, spend(1, 40))
            .await
            .unwrap();
        let now = ledger(&log).window("t", Window::Hour).await.unwrap();
        assert_eq!(
            (now.spent, now.reserved),
            (Spend::default(), Spend::default()),
            "{}",
            backend.name()
        );
        let old = backend.number(&format!(
            "SELECT spent_output * 1000 + reserved_output FROM budget_windows WHERE window_ms = {before}"
        ));
        assert_eq!(
            old,
            40_000,
            "{}: charged to its own window, released there",
            backend.name()
        );
    }
}

/// Issue 31 #6: a reservation whose host died may have had its calls reach
/// the provider, so when it lapses it is charged what it held, never
/// released; its host, if it comes back, settles it for what it spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_reservation_is_charged_what_it_held_until_its_host_settles_it() {
    for backend in Backend::all() {
        let name = backend.name();
        let log = backend.open().await;
        let r = request("t", spend(60, 100), Duration::ZERO);
        let Reserved::Admitted {
            reservation: lapsed,
            ..
        } = ledger(&log).reserve(&r).await.unwrap()
        else {
            panic!("{name}: fits");
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        // 60 + 60 do not fit: the lapsed one counts as spent.
        let r = request("t", spend(60, 100), Duration::from_secs(60));
        let refused = ledger(&log).reserve(&r).await.unwrap();
        assert_eq!(
            refused,
            Reserved::Refused {
                key: "requests",
                left: 40,
                needed: 60,
                room: Limits {
                    requests: Some(40),
                    output_tokens: Some(1_000_000 - 100),
                    input_tokens: None,
                    cost: None,
                },
                pending: false
            },
            "{name}"
        );
        let state = ledger(&log).window("t", Window::Hour).await.unwrap();
        assert_eq!(
            (state.spent, state.reserved),
            (spend(60, 100), Spend::default()),
            "{name}: charged, not released"
        );
        // Its host came back and settles it: what it spent replaces it.
        let state = ledger(&log).settle("t", lapsed, spend(1, 5)).await.unwrap();
        assert_eq!(
            (state.spent, state.reserved),
            (spend(1, 5), Spend::default()),
            "{name}"
        );
        let Reserved::Admitted {
            reservation: live,
            state,
            ..
        } = ledger(&log).reserve(&r).await.unwrap()
        else {
            panic!("{name}: fits once the lapsed one was settled");
        };
        assert_eq!(state.reserved, spend(60, 100), "{name}");
        let state = ledger(&log).settle("t", live, spend(2, 7)).await.unwrap();
        assert_eq!(
            (state.spent, state.reserved),
            (spend(3, 12), Spend::default()),
            "{name}"
        );
        let _: Reservation = live;
    }
}

/// Issue 31 #5: a chunk is granted at most half of what is left (and one
/// call's worst case when only that fits); a trim charges what its settled
/// calls spent and gives back what no call of it holds; while a chunk is
/// in the window, a refusal says room may come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_takes_half_of_what_is_left_and_gives_back_what_no_call_holds() {
    for backend in Backend::all() {
        let name = backend.name();
        let log = backend.open().await;
        let chunk = ReserveRequest {
            calls: 256,
            ..request("t", spend(3, 10), Duration::from_secs(60))
        };
        let Reserved::Admitted {
            reservation,
            calls,
            state,
        } = ledger(&log).reserve(&chunk).await.unwrap()
        else {
            panic!("{name}: fits");
        };
        assert_eq!(calls, 16, "{name}: 16 × 3 is the most in half of 100");
        assert_eq!(state.reserved, spend(48, 160), "{name}");
        // The rest goes in smaller chunks, and then one call at a time.
        let mut granted = vec![];
        loop {
            match ledger(&log).reserve(&chunk).await.unwrap() {
                Reserved::Admitted { calls, .. } => granted.push(calls),
                Reserved::Refused {
                    left,
                    needed,
                    pending,
                    ..
                } => {
                    assert_eq!((left, needed), (1, 3), "{name}");
                    assert!(pending, "{name}: chunks hold room that may come back");
                    break;
                }
            }
        }
        assert_eq!(granted, [8, 4, 2, 1, 1, 1], "{name}");
        // The first chunk: 5 calls settled having spent 1 request each, 2
        // in flight; the rest of its 48 goes back.
        let state = ledger(&log)
            .trim("t", reservation, spend(5, 20), spend(6, 20))
            .await
            .unwrap();
        assert_eq!(state.spent, spend(5, 20), "{name}");
        assert_eq!(state.reserved.requests, 99 - 48 + 6, "{name}");
        let Reserved::Admitted { calls, .. } = ledger(&log).reserve(&chunk).await.unwrap() else {
            panic!("{name}: the room given back fits");
        };
        assert!(calls >= 1, "{name}");
        // Settled: its last calls' spend charged, nothing more held.
        let state = ledger(&log)
            .settle("t", reservation, spend(2, 9))
            .await
            .unwrap();
        assert_eq!(state.spent, spend(7, 29), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_claimed_waited_on_answered_and_released() {
    for backend in Backend::all() {
        let log = backend.open().await;
        let claim = |key: &'static str, sha: &'static str, ttl: u64| KeyClaim {
            tenant: "t",
            key,
            request_sha256: sha,
            owner: "test-host",
            ttl: Duration::from_millis(ttl),
            keep: Duration::from_secs(3600),
        };
        let keys = ledger(&log);
        let name = backend.name();
        assert_eq!(
            keys.claim_key(&claim("k", "a", 60_000)).await.unwrap(),
            KeyState::Claimed,
            "{name}"
        );
        assert_eq!(
            keys.claim_key(&claim("k", "a", 60_000)).await.unwrap(),
            KeyState::Running,
            "{name}"
        );
        assert_eq!(
            keys.claim_key(&claim("k", "b", 60_000)).await.unwrap(),
            KeyState::Mismatch,
            "{name}"
        );
        let answer = StoredAnswer {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"ok\": true}\n\x00\xff".to_vec(),
        };
        keys.answer_key("t", "k", &answer).await.unwrap();
        assert_eq!(
            keys.claim_key(&claim("k", "a", 60_000)).await.unwrap(),
            KeyState::Answered(answer),
            "{name}"
        );
        // Another tenant's key of the same name is another key.
        let theirs = KeyClaim {
            tenant: "u",
            ..claim("k", "b", 60_000)
        };
        assert_eq!(
            keys.claim_key(&theirs).await.unwrap(),
            KeyState::Claimed,
            "{name}"
        );
        // Released: the next request runs it.
        assert_eq!(
            keys.claim_key(&claim("r", "a", 60_000)).await.unwrap(),
            KeyState::Claimed
        );
        keys.release_key("t", "r").await.unwrap();
        assert_eq!(
            keys.claim_key(&claim("r", "a", 60_000)).await.unwrap(),
            KeyState::Claimed,
            "{name}"
        );
        // A claim whose host died lapses, and is taken over.
        assert_eq!(
            keys.claim_key(&claim("d", "a", 0)).await.unwrap(),
            KeyState::Claimed
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            keys.claim_key(&claim("d", "a", 60_000)).await.unwrap(),
            KeyState::Claimed,
            "{name}"
        );
    }
}

//! A circuit breaker per target (`PROVIDER/MODEL`): after
//! `[retry] circuitBreakerFailures` unavailable answers in a row (a
//! refused connection, a timeout, 408, 429, 5xx), a target is open: for
//! `circuitBreakerCoolDownMs` a chain tries its other targets first, and
//! goes to it only when they have failed too. Once the cool-down is over,
//! one call tries it first (half open): an answer closes it, another
//! unavailable answer opens it again. A target alone in its chain is
//! always tried: there is nothing to try first instead.
//!
//! Decisions only: the time is handed in (the host's clock), so a test
//! walks a breaker through its states without waiting.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a target fares, as `/metrics` and the viewer show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Answering: tried in its place.
    Closed,
    /// Failing: tried after every other target, until `retry_in` is over.
    Open {
        /// What is left of its cool-down.
        retry_in: Duration,
    },
    /// Its cool-down is over: the next call tries it first, once.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open { .. } => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

/// One target's health, as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealth {
    /// The provider.
    pub provider: String,
    /// The model asked of it.
    pub model: String,
    /// Its breaker.
    pub state: BreakerState,
    /// Unavailable answers since its last answer.
    pub consecutive_failures: u32,
    /// Requests that reached it (or were refused a connection) so far.
    pub requests: u64,
    /// Of them, unavailable.
    pub unavailable: u64,
    /// The last unavailable answer's message.
    pub last_error: Option<String>,
}

/// How a request to a target ended, for its breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    /// The provider answered (a reply, or a refusal of the request
    /// itself: it is up).
    Answered,
    /// It was unavailable, saying this.
    Unavailable(&'a str),
}

#[derive(Debug, Default)]
struct Health {
    consecutive: u32,
    /// When it opened; `None` while closed.
    opened: Option<Instant>,
    /// When a call claimed its half-open try; `None` when none has.
    probing: Option<Instant>,
    requests: u64,
    unavailable: u64,
    last_error: Option<String>,
}

/// The breakers of one host's targets.
#[derive(Debug)]
pub struct Breakers {
    /// Unavailable answers in a row that open a target; 0: never.
    failures: u32,
    cool_down: Duration,
    targets: Mutex<HashMap<(String, String), Health>>,
}

impl Breakers {
    /// Breakers that open after `failures` unavailable answers in a row
    /// (0: never) for `cool_down`.
    pub fn new(failures: u32, cool_down: Duration) -> Self {
        Self {
            failures,
            cool_down,
            targets: Mutex::default(),
        }
    }

    fn state(&self, h: &Health, now: Instant) -> BreakerState {
        match h.opened {
            None => BreakerState::Closed,
            Some(at) => match (at + self.cool_down).checked_duration_since(now) {
                Some(left) if !left.is_zero() => BreakerState::Open { retry_in: left },
                _ => BreakerState::HalfOpen,
            },
        }
    }

    /// The order in which one call tries `targets` (each `(provider,
    /// model)`), as indices: those whose breaker lets them go first in
    /// their own order, then the open ones in theirs. A half-open target
    /// goes first when it would be the first tried, and that call is its
    /// one try (a try unanswered for a whole cool-down is given to another
    /// call).
    pub fn order(&self, targets: &[(&str, &str)], now: Instant) -> Vec<usize> {
        let all: Vec<usize> = (0..targets.len()).collect();
        if self.failures == 0 || targets.len() < 2 {
            return all;
        }
        let Ok(mut states) = self.targets.lock() else {
            return all;
        };
        let (mut first, mut last) = (Vec::new(), Vec::new());
        for (i, (provider, model)) in targets.iter().enumerate() {
            let key = ((*provider).to_owned(), (*model).to_owned());
            let Some(h) = states.get_mut(&key) else {
                first.push(i);
                continue;
            };
            match self.state(h, now) {
                BreakerState::Closed => first.push(i),
                BreakerState::Open { .. } => last.push(i),
                BreakerState::HalfOpen => {
                    let claimed = h
                        .probing
                        .is_some_and(|at| now.saturating_duration_since(at) < self.cool_down);
                    if first.is_empty() && !claimed {
                        h.probing = Some(now);
                        first.push(i);
                    } else {
                        last.push(i);
                    }
                }
            }
        }
        first.extend(last);
        first
    }

    /// A request to `provider`'s `model` ended with `answer` at `now`.
    pub fn record(&self, provider: &str, model: &str, answer: Answer<'_>, now: Instant) {
        let Ok(mut states) = self.targets.lock() else {
            return;
        };
        let h = states
            .entry((provider.to_owned(), model.to_owned()))
            .or_default();
        h.requests += 1;
        match answer {
            Answer::Answered => {
                h.consecutive = 0;
                h.opened = None;
                h.probing = None;
            }
            Answer::Unavailable(message) => {
                h.unavailable += 1;
                h.consecutive = h.consecutive.saturating_add(1);
                h.last_error = Some(message.to_owned());
                let half_open = h.opened.is_some() && h.probing.is_some();
                let opens = self.failures > 0 && h.consecutive >= self.failures;
                if (opens && h.opened.is_none()) || half_open {
                    h.opened = Some(now);
                    h.probing = None;
                }
            }
        }
    }

    /// Every target seen so far, by provider then model.
    pub fn health(&self, now: Instant) -> Vec<TargetHealth> {
        let Ok(states) = self.targets.lock() else {
            return Vec::new();
        };
        let mut all: Vec<TargetHealth> = states
            .iter()
            .map(|((provider, model), h)| TargetHealth {
                provider: provider.clone(),
                model: model.clone(),
                state: self.state(h, now),
                consecutive_failures: h.consecutive,
                requests: h.requests,
                unavailable: h.unavailable,
                last_error: h.last_error.clone(),
            })
            .collect();
        all.sort_by(|a, b| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: [(&str, &str); 2] = [("dead", "m"), ("live", "m")];

    fn fail(b: &Breakers, now: Instant) {
        b.record("dead", "m", Answer::Unavailable("HTTP 503: down"), now);
    }

    #[test]
    fn a_target_failing_in_a_row_is_tried_last_for_a_cool_down_then_once_first() {
        let b = Breakers::new(3, Duration::from_secs(30));
        let t0 = Instant::now();
        for i in 0..2 {
            fail(&b, t0);
            assert_eq!(
                b.order(&CHAIN, t0),
                [0, 1],
                "closed after {} failures",
                i + 1
            );
        }
        fail(&b, t0);
        assert_eq!(b.order(&CHAIN, t0), [1, 0], "open: tried after the others");
        let health = &b.health(t0)[0];
        assert_eq!(health.state.as_str(), "open");
        assert_eq!((health.requests, health.unavailable), (3, 3));
        assert_eq!(health.last_error.as_deref(), Some("HTTP 503: down"));
        // Its requests as the last resort do not reset the cool-down.
        fail(&b, t0 + Duration::from_secs(10));
        let t1 = t0 + Duration::from_secs(30);
        assert_eq!(b.health(t1)[0].state, BreakerState::HalfOpen);
        assert_eq!(b.order(&CHAIN, t1), [0, 1], "one call tries it first");
        assert_eq!(b.order(&CHAIN, t1), [1, 0], "and only one");
        // The try fails: open again for a whole cool-down.
        fail(&b, t1);
        assert_eq!(b.order(&CHAIN, t1 + Duration::from_secs(29)), [1, 0]);
        let t2 = t1 + Duration::from_secs(30);
        assert_eq!(b.order(&CHAIN, t2), [0, 1]);
        b.record("dead", "m", Answer::Answered, t2);
        assert_eq!(b.health(t2)[0].state, BreakerState::Closed);
        assert_eq!(b.health(t2)[0].consecutive_failures, 0);
        assert_eq!(b.order(&CHAIN, t2), [0, 1]);
    }

    #[test]
    fn an_answer_between_failures_keeps_it_closed_and_a_lone_target_is_always_tried() {
        let b = Breakers::new(2, Duration::from_secs(30));
        let t0 = Instant::now();
        fail(&b, t0);
        b.record("dead", "m", Answer::Answered, t0);
        fail(&b, t0);
        assert_eq!(b.order(&CHAIN, t0), [0, 1]);
        fail(&b, t0);
        assert_eq!(b.order(&CHAIN, t0), [1, 0]);
        assert_eq!(b.order(&CHAIN[..1], t0), [0], "nothing else to try");
    }

    #[test]
    fn a_try_never_answered_is_given_to_another_call_after_a_cool_down() {
        let b = Breakers::new(1, Duration::from_secs(10));
        let t0 = Instant::now();
        fail(&b, t0);
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(
            b.order(&CHAIN, t1),
            [0, 1],
            "claimed, then the call went away"
        );
        assert_eq!(b.order(&CHAIN, t1 + Duration::from_secs(9)), [1, 0]);
        assert_eq!(b.order(&CHAIN, t1 + Duration::from_secs(10)), [0, 1]);
    }

    #[test]
    fn with_no_threshold_nothing_opens() {
        let b = Breakers::new(0, Duration::from_secs(10));
        let t0 = Instant::now();
        for _ in 0..100 {
            fail(&b, t0);
        }
        assert_eq!(b.order(&CHAIN, t0), [0, 1]);
        assert_eq!(b.health(t0)[0].state, BreakerState::Closed);
        assert_eq!(b.health(t0)[0].unavailable, 100, "still counted");
    }
}

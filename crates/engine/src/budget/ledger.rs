//! Where budgets and idempotency keys are kept: a run log's database
//! (SQLite for one machine, PostgreSQL for many), so that every host on it
//! shares one budget and one set of keys. Each operation is atomic in the
//! database: concurrent reservations never take a window past its limits.

use super::{Reservation, Spend};
use crate::provider::BoxFuture;
use crate::runlog::RunLogError;
use std::time::Duration;

/// A budget's window: spend counts from its start, aligned to the Unix
/// epoch, and starts again at the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// One hour.
    Hour,
    /// One day (UTC).
    #[default]
    Day,
    /// Thirty days.
    Days30,
    /// No window: a lifetime budget.
    Lifetime,
}

impl Window {
    /// The window of a config's `window` (`"1h"`, `"1d"`, `"30d"`, `"none"`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "1h" => Some(Self::Hour),
            "1d" => Some(Self::Day),
            "30d" => Some(Self::Days30),
            "none" => Some(Self::Lifetime),
            _ => None,
        }
    }

    /// The config's spelling of it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::Day => "1d",
            Self::Days30 => "30d",
            Self::Lifetime => "none",
        }
    }

    /// Its length, none for a lifetime budget.
    pub fn length(self) -> Option<Duration> {
        const HOUR: u64 = 3600;
        match self {
            Self::Hour => Some(Duration::from_secs(HOUR)),
            Self::Day => Some(Duration::from_secs(24 * HOUR)),
            Self::Days30 => Some(Duration::from_secs(30 * 24 * HOUR)),
            Self::Lifetime => None,
        }
    }

    /// The start of the window `now_ms` falls in (0 for a lifetime budget).
    pub fn start_ms(self, now_ms: u64) -> u64 {
        match self.length() {
            Some(length) => {
                let length = length.as_millis() as u64;
                now_ms - now_ms % length
            }
            None => 0,
        }
    }
}

/// A budget's limits per window: `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Provider requests.
    pub requests: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Input tokens.
    pub input_tokens: Option<u64>,
}

impl Limits {
    /// The limits with their budget keys, in [`Spend::by_key`]'s order.
    pub fn by_key(&self) -> [(&'static str, Option<u64>); 3] {
        [
            ("requests", self.requests),
            ("outputTokens", self.output_tokens),
            ("inputTokens", self.input_tokens),
        ]
    }

    /// What is left of each limit in `state` (`None`: unlimited).
    pub fn left(&self, state: &WindowState) -> [Option<u64>; 3] {
        let used = state.used().by_key();
        let limits = self.by_key();
        std::array::from_fn(|i| limits[i].1.map(|l| l.saturating_sub(used[i].1)))
    }
}

/// One window of one tenant: what its settled calls spent, and what the
/// calls still going on have reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowState {
    /// The window's start (ms since the Unix epoch; 0 for a lifetime one).
    pub window_ms: u64,
    /// Charged by settled calls.
    pub spent: Spend,
    /// Held by calls not yet settled.
    pub reserved: Spend,
}

impl WindowState {
    /// Spent and reserved together: what a new reservation must fit beside.
    pub fn used(&self) -> Spend {
        Spend {
            requests: self.spent.requests + self.reserved.requests,
            output_tokens: self.spent.output_tokens + self.reserved.output_tokens,
            input_tokens: self.spent.input_tokens + self.reserved.input_tokens,
        }
    }
}

/// A reservation asked of the ledger: room for up to `calls` worst cases
/// of `need` (a host's chunk of calls), of which the ledger grants as many
/// as fit in half of what is left, and one when only one fits (see
/// [`grant`]).
#[derive(Debug, Clone, Copy)]
pub struct ReserveRequest<'a> {
    /// Whose budget.
    pub tenant: &'a str,
    /// Its window.
    pub window: Window,
    /// Its limits.
    pub limits: Limits,
    /// One call's worst case.
    pub need: Spend,
    /// How many calls' worst cases are asked for at most (1: this call's).
    pub calls: u64,
    /// The host that holds it (for the operator reading the table).
    pub owner: &'a str,
    /// How long it holds before it lapses on its own (a host killed while
    /// holding it does not keep the budget).
    pub ttl: Duration,
}

/// What came of a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// It fits: the budget holds `calls` worst cases until the reservation
    /// is settled or lapses.
    Admitted {
        /// The reservation.
        reservation: Reservation,
        /// How many calls' worst cases it holds (1 ..= what was asked).
        calls: u64,
        /// The window after it.
        state: WindowState,
    },
    /// Not one worst case fits: `key` is the first budget key it would pass.
    Refused {
        /// The budget key (`requests`, `outputTokens`, `inputTokens`).
        key: &'static str,
        /// What is left of it.
        left: u64,
        /// What the call needs of it.
        needed: u64,
        /// What is left of each limited key.
        room: Limits,
        /// Whether room may come back soon: a reservation of several calls
        /// (a host's chunk, which may hold room no call of it holds yet) is
        /// in the window. A host gives such room back within a chunk's
        /// life, so a refusal with `pending` is worth asking again before
        /// the call is refused.
        pending: bool,
    },
}

/// The first limit `need` does not fit beside `state`, with what is left of
/// it (`pending` false); `None` when it fits.
pub fn first_misfit(limits: &Limits, state: &WindowState, need: &Spend) -> Option<Reserved> {
    let left = limits.left(state);
    let room = Limits {
        requests: left[0],
        output_tokens: left[1],
        input_tokens: left[2],
    };
    need.by_key()
        .iter()
        .zip(left)
        .find_map(|(&(key, needed), left)| match left {
            Some(left) if needed > left => Some(Reserved::Refused {
                key,
                left,
                needed,
                room,
                pending: false,
            }),
            _ => None,
        })
}

/// How many of `calls` worst cases of `need` a reservation is granted
/// beside `state`: as many as fit in half of what is left of every limited
/// key (so a chunk never takes room the other hosts need to make progress),
/// and one when one fits at all; `Err` with the refusal when none does.
pub fn grant(
    limits: &Limits,
    state: &WindowState,
    need: &Spend,
    calls: u64,
) -> Result<u64, Reserved> {
    if let Some(refused) = first_misfit(limits, state, need) {
        return Err(refused);
    }
    let left = limits.left(state);
    let most = need
        .by_key()
        .iter()
        .zip(left)
        .filter_map(|(&(_, needed), left)| {
            Some((left? / 2).checked_div(needed).unwrap_or(u64::MAX))
        })
        .min()
        .unwrap_or(u64::MAX);
    Ok(calls.min(most).max(1))
}

/// What a change to a reservation does to its window, as amounts to add to
/// `spent` and to `reserved` (either may be negative).
pub type WindowChange = ([i64; 3], [i64; 3]);

/// The change to its window of a reservation holding `held` that is now to
/// hold `hold` (0 when it is settled), its calls having spent `charge`
/// since. A reservation that lapsed was charged what it held (its calls
/// may have reached the provider, and it is the only bound known): its
/// holdings count as spent, so what it holds less is taken off `spent`.
pub fn adjustment(held: Spend, lapsed: bool, charge: Spend, hold: Spend) -> WindowChange {
    let n = |s: Spend| [s.requests, s.output_tokens, s.input_tokens].map(signed);
    let (held, charge, hold) = (n(held), n(charge), n(hold));
    let freed: [i64; 3] = std::array::from_fn(|i| held[i] - hold[i]);
    if lapsed {
        (std::array::from_fn(|i| charge[i] - freed[i]), [0; 3])
    } else {
        (charge, freed.map(|v| -v))
    }
}

/// An amount as a database integer (saturating).
pub fn signed(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// An idempotency key asked for by a request.
#[derive(Debug, Clone, Copy)]
pub struct KeyClaim<'a> {
    /// Whose key (keys of different tenants never meet).
    pub tenant: &'a str,
    /// The `Idempotency-Key` header.
    pub key: &'a str,
    /// The SHA-256 (hex) of the endpoint and the body: a repeat must match.
    pub request_sha256: &'a str,
    /// The host that runs it.
    pub owner: &'a str,
    /// How long its first request may run before a repeat may take it over.
    pub ttl: Duration,
    /// How long a settled key answers repeats (`runlog.idempotencyHours`).
    pub keep: Duration,
}

/// A recorded answer: what a repeat of a settled key gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The headers worth repeating (content type, `x-callai-*`).
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

/// Where a key stands when a request claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// New (or lapsed): this request runs it.
    Claimed,
    /// Settled: answer this.
    Answered(StoredAnswer),
    /// Another request with it is running: wait and ask again.
    Running,
    /// Used with another request body.
    Mismatch,
}

/// Budgets and idempotency keys in a run log's database.
pub trait Ledger: Send + Sync {
    /// Reserves what [`grant`] grants of `request` in the tenant's current
    /// window, atomically; charges the tenant's lapsed reservations first
    /// (their hosts died or stalled holding them: what they held is
    /// charged, never released, as their calls may have reached the
    /// provider).
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>>;

    /// Charges `spent` to the reservation's window and releases the
    /// reservation (see [`adjustment`]: a lapsed one was charged what it
    /// held, which `spent` now replaces).
    fn settle<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        spent: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>>;

    /// Charges `charge` (what the settled calls of a chunk spent) and
    /// makes the reservation hold `hold` (the worst cases of its calls
    /// still in flight), releasing the rest: a chunk that takes no more
    /// calls gives back the room none of its calls holds.
    fn trim<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        charge: Spend,
        hold: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>>;

    /// The tenant's current window, lapsed reservations charged.
    fn window<'a>(
        &'a self,
        tenant: &'a str,
        window: Window,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>>;

    /// Claims an idempotency key, or says where it stands.
    fn claim_key<'a>(
        &'a self,
        claim: &'a KeyClaim<'a>,
    ) -> BoxFuture<'a, Result<KeyState, RunLogError>>;

    /// Records the answer of a claimed key.
    fn answer_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
        answer: &'a StoredAnswer,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Gives a claimed key up unanswered (its request failed before it had
    /// an answer to keep): a repeat runs it again.
    fn release_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_align_to_the_epoch() {
        let hour = 3_600_000;
        assert_eq!(Window::Hour.start_ms(5 * hour + 7), 5 * hour);
        assert_eq!(Window::Day.start_ms(25 * hour), 24 * hour);
        assert_eq!(Window::Lifetime.start_ms(25 * hour), 0);
        assert_eq!(Window::parse("30d"), Some(Window::Days30));
        assert_eq!(Window::parse("2d"), None);
    }

    #[test]
    fn the_first_limit_passed_is_named() {
        let limits = Limits {
            requests: Some(10),
            output_tokens: Some(1000),
            input_tokens: None,
        };
        let state = WindowState {
            window_ms: 0,
            spent: Spend {
                requests: 4,
                output_tokens: 500,
                input_tokens: 1 << 40,
            },
            reserved: Spend {
                requests: 3,
                output_tokens: 100,
                input_tokens: 0,
            },
        };
        let fits = Spend {
            requests: 3,
            output_tokens: 400,
            input_tokens: 1 << 40,
        };
        assert_eq!(first_misfit(&limits, &state, &fits), None);
        let too_many = Spend {
            output_tokens: 401,
            ..fits
        };
        assert_eq!(
            first_misfit(&limits, &state, &too_many),
            Some(Reserved::Refused {
                key: "outputTokens",
                left: 400,
                needed: 401,
                room: Limits {
                    requests: Some(3),
                    output_tokens: Some(400),
                    input_tokens: None,
                },
                pending: false,
            })
        );
    }

    #[test]
    fn a_chunk_takes_at_most_half_of_what_is_left_and_one_call_what_fits() {
        let limits = Limits {
            requests: Some(20),
            ..Limits::default()
        };
        let at = |spent: u64| WindowState {
            spent: Spend {
                requests: spent,
                ..Spend::default()
            },
            ..WindowState::default()
        };
        let one = Spend {
            requests: 1,
            ..Spend::default()
        };
        assert_eq!(grant(&limits, &at(0), &one, 256), Ok(10));
        assert_eq!(grant(&limits, &at(10), &one, 256), Ok(5));
        assert_eq!(grant(&limits, &at(17), &one, 256), Ok(1));
        assert_eq!(
            grant(&limits, &at(19), &one, 256),
            Ok(1),
            "the last one fits"
        );
        assert_eq!(grant(&limits, &at(0), &one, 3), Ok(3), "no more than asked");
        assert!(matches!(
            grant(&limits, &at(20), &one, 1),
            Err(Reserved::Refused {
                key: "requests",
                left: 0,
                needed: 1,
                ..
            })
        ));
        // Unlimited keys bound nothing.
        assert_eq!(grant(&Limits::default(), &at(0), &one, 256), Ok(256));
    }

    #[test]
    fn a_lapsed_reservation_counts_as_spent_until_its_host_settles_it() {
        let s = |requests: u64| Spend {
            requests,
            ..Spend::default()
        };
        // Live: trimming a chunk of 10 to the 3 in flight, 2 spent.
        assert_eq!(
            adjustment(s(10), false, s(2), s(3)),
            ([2, 0, 0], [-7, 0, 0])
        );
        // Settled: its spend charged, all it held released.
        assert_eq!(adjustment(s(3), false, s(3), s(0)), ([3, 0, 0], [-3, 0, 0]));
        // Lapsed: the 10 it held were charged; a late trim keeps 3 of
        // them charged for the calls still in flight, and the 2 spent.
        assert_eq!(adjustment(s(10), true, s(2), s(3)), ([-5, 0, 0], [0; 3]));
        // A late settle replaces what the lapse charged with the spend.
        assert_eq!(adjustment(s(3), true, s(1), s(0)), ([-2, 0, 0], [0; 3]));
    }
}

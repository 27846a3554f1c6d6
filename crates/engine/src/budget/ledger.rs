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
    /// One minute: a rate limit.
    Minute,
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
    /// The window of a config's `window` or `per` (`"1m"`, `"1h"`, `"1d"`,
    /// `"30d"`, `"none"`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "1m" => Some(Self::Minute),
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
            Self::Minute => "1m",
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
            Self::Minute => Some(Duration::from_secs(60)),
            Self::Hour => Some(Duration::from_secs(HOUR)),
            Self::Day => Some(Duration::from_secs(24 * HOUR)),
            Self::Days30 => Some(Duration::from_secs(30 * 24 * HOUR)),
            Self::Lifetime => None,
        }
    }

    /// The end of the window that starts at `start_ms`; `None` for a
    /// lifetime budget, which never ends.
    pub fn end_ms(self, start_ms: u64) -> Option<u64> {
        self.length().map(|l| start_ms + l.as_millis() as u64)
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
    /// Money, in billionths of the budget's currency.
    pub cost: Option<u64>,
}

impl Limits {
    /// The limits in [`KEYS`](super::KEYS)' order.
    pub fn amounts(&self) -> [Option<u64>; 4] {
        [
            self.requests,
            self.output_tokens,
            self.input_tokens,
            self.cost,
        ]
    }

    /// The limits of amounts in [`KEYS`](super::KEYS)' order.
    pub fn from_amounts([requests, output_tokens, input_tokens, cost]: [Option<u64>; 4]) -> Self {
        Self {
            requests,
            output_tokens,
            input_tokens,
            cost,
        }
    }

    /// The limits with their budget keys, in [`Spend::by_key`]'s order.
    pub fn by_key(&self) -> [(&'static str, Option<u64>); 4] {
        let amounts = self.amounts();
        std::array::from_fn(|i| (super::KEYS[i], amounts[i]))
    }

    /// What is left of each limit in `state` (`None`: unlimited).
    pub fn left(&self, state: &WindowState) -> [Option<u64>; 4] {
        let used = state.used().amounts();
        let limits = self.amounts();
        std::array::from_fn(|i| limits[i].map(|l| l.saturating_sub(used[i])))
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
        self.spent.plus(self.reserved)
    }
}

/// A reservation asked of the ledger: room for up to `calls` worst cases
/// of `need` (a host's chunk of calls), of which the ledger grants as many
/// as fit in half of what is left, and one when only one fits (see
/// [`grant`](super::grant)).
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
        /// The budget key (one of [`KEYS`](super::KEYS)).
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
    /// Reserves what [`grant`](super::grant) grants of `request` in the tenant's current
    /// window, atomically; charges the tenant's lapsed reservations first
    /// (their hosts died or stalled holding them: what they held is
    /// charged, never released, as their calls may have reached the
    /// provider).
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>>;

    /// Charges `spent` to the reservation's window and releases the
    /// reservation (see [`adjustment`](super::adjustment): a lapsed one was charged what it
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
    /// calls gives back the room none of its calls holds. A trim never
    /// grows a reservation ([`trimmed`](super::trimmed)): trims may arrive out of order.
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
        assert_eq!(
            Window::Minute.start_ms(5 * hour + 61_000),
            5 * hour + 60_000
        );
        assert_eq!(Window::parse("1m"), Some(Window::Minute));
        assert_eq!(Window::Minute.end_ms(60_000), Some(120_000));
        assert_eq!(Window::Lifetime.end_ms(0), None);
        assert_eq!(Window::Day.start_ms(25 * hour), 24 * hour);
        assert_eq!(Window::Lifetime.start_ms(25 * hour), 0);
        assert_eq!(Window::parse("30d"), Some(Window::Days30));
        assert_eq!(Window::parse("2d"), None);
    }
}

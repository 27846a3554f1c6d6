//! How long to wait before re-sending after a transient failure: full-jitter
//! exponential backoff, or the provider's own `retry-after`. Pure: the
//! random draw is an input, so the policy is tested without a clock.

use std::time::Duration;

/// `[retry] backoffBaseMs`, `backoffMaxMs`, `maxRetryAfterMs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait's ceiling.
    pub base: Duration,
    /// No wait's ceiling goes above this.
    pub max: Duration,
    /// The longest `retry-after` honoured; a provider asking for more is
    /// given up on.
    pub max_retry_after: Duration,
}

/// What to do before the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// Wait this long, then send.
    For(Duration),
    /// Do not send again: the message says why.
    GiveUp(String),
}

impl Backoff {
    /// The wait after the `failures`-th transient failure in a row (1 for
    /// the first): the provider's `retry_after` when it gave one, else a
    /// draw `jitter` in `[0, 1)` of `min(max, base * 2^(failures - 1))`.
    /// A wait that would end past `remaining` (the run's wall time left) is
    /// given up on at once rather than waited out.
    pub fn wait(
        &self,
        failures: u32,
        retry_after: Option<Duration>,
        jitter: f64,
        remaining: Option<Duration>,
    ) -> Wait {
        let wait = match retry_after {
            Some(asked) if asked > self.max_retry_after => {
                return Wait::GiveUp(format!(
                    "the provider asked to wait {} ms before retrying, more than retry.maxRetryAfterMs ({} ms)",
                    asked.as_millis(),
                    self.max_retry_after.as_millis()
                ));
            }
            Some(asked) => asked,
            None => {
                let doubling = 2u32.saturating_pow(failures.saturating_sub(1).min(31));
                let ceiling = self.base.saturating_mul(doubling).min(self.max);
                ceiling.mul_f64(jitter.clamp(0.0, 1.0))
            }
        };
        match remaining {
            Some(left) if wait > left => Wait::GiveUp(format!(
                "waiting {} ms before retrying would pass the run's wall-clock limit ({} ms left)",
                wait.as_millis(),
                left.as_millis()
            )),
            _ => Wait::For(wait),
        }
    }
}

/// A small, fast source of jitter (SplitMix64): backoff needs spread, not
/// secrecy.
#[derive(Debug)]
pub struct SplitMix(std::sync::atomic::AtomicU64);

impl SplitMix {
    /// Seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(std::sync::atomic::AtomicU64::new(seed))
    }

    /// Seeded from the clock and this value's address.
    pub fn from_entropy() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let here = &nanos as *const u64 as u64;
        Self::new(nanos ^ here.rotate_left(32))
    }

    /// The next draw in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        let seed = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Backoff {
        Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_millis(8000),
            max_retry_after: Duration::from_secs(60),
        }
    }

    #[test]
    fn full_jitter_doubles_the_ceiling_up_to_the_cap() {
        let p = policy();
        let top = |n| match p.wait(n, None, 0.999_999, None) {
            Wait::For(d) => d,
            other => panic!("{other:?}"),
        };
        let ms = |n| top(n).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(5), ms(6)],
            [499, 999, 1999, 3999, 7999, 7999]
        );
        assert_eq!(top(1000), top(6), "no overflow far out");
        assert_eq!(p.wait(3, None, 0.0, None), Wait::For(Duration::ZERO));
        assert_eq!(
            p.wait(3, None, 0.5, None),
            Wait::For(Duration::from_millis(1000))
        );
    }

    #[test]
    fn retry_after_is_honoured_up_to_its_cap() {
        let p = policy();
        assert_eq!(
            p.wait(1, Some(Duration::from_secs(3)), 0.1, None),
            Wait::For(Duration::from_secs(3)),
            "no jitter on the provider's own wait"
        );
        match p.wait(1, Some(Duration::from_secs(61)), 0.1, None) {
            Wait::GiveUp(m) => assert!(m.contains("maxRetryAfterMs"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wait_past_the_runs_wall_time_gives_up_at_once() {
        let p = policy();
        let left = Some(Duration::from_millis(900));
        assert_eq!(
            p.wait(1, None, 0.9, left),
            Wait::For(Duration::from_millis(450))
        );
        match p.wait(1, Some(Duration::from_secs(2)), 0.0, left) {
            Wait::GiveUp(m) => assert!(m.contains("wall-clock limit"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn splitmix_draws_spread_over_the_unit_interval() {
        let r = SplitMix::new(7);
        let draws: Vec<f64> = (0..1000).map(|_| r.next_f64()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let low = draws.iter().filter(|d| **d < 0.5).count();
        assert!((400..600).contains(&low), "{low} of 1000 below 0.5");
    }
}

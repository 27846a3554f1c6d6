//! The arithmetic of a budget window's room, shared by every ledger: what
//! fits, how much of a host's chunk is granted, and what a trim, a settle
//! or a lapse does to the window. Pure: the ledgers do the I/O.

use super::Spend;
use super::ledger::{Limits, Reserved, WindowState};

/// The first limit `need` does not fit beside `state`, with what is left of
/// it (`pending` false); `None` when it fits.
pub fn first_misfit(limits: &Limits, state: &WindowState, need: &Spend) -> Option<Reserved> {
    let left = limits.left(state);
    let room = Limits::from_amounts(left);
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
pub type WindowChange = ([i64; 4], [i64; 4]);

/// The change to its window of a reservation holding `held` that is now to
/// hold `hold` (0 when it is settled), its calls having spent `charge`
/// since. A reservation that lapsed was charged what it held (its calls
/// may have reached the provider, and it is the only bound known): its
/// holdings count as spent, so what it holds less is taken off `spent`.
pub fn adjustment(held: Spend, lapsed: bool, charge: Spend, hold: Spend) -> WindowChange {
    let n = |s: Spend| s.amounts().map(signed);
    let (held, charge, hold) = (n(held), n(charge), n(hold));
    let freed: [i64; 4] = std::array::from_fn(|i| held[i] - hold[i]);
    if lapsed {
        (std::array::from_fn(|i| charge[i] - freed[i]), [0; 4])
    } else {
        (charge, freed.map(|v| -v))
    }
}

/// What a trim of a reservation holding `held` makes it hold when asked
/// for `hold`: never more, key by key. A host's trims of one chunk may
/// reach the database out of order (each is written after the lock that
/// decided it), and a chunk's hold only shrinks once it is trimmed (it
/// takes no new calls), so a trim that arrives after a later one asks for
/// more than the row holds: it keeps the smaller hold, and its charge (a
/// delta) still counts. A trim that grew a reservation would take room no
/// reservation checked, and could take the window past its limits.
pub fn trimmed(held: Spend, hold: Spend) -> Spend {
    let (hold, held) = (hold.amounts(), held.amounts());
    Spend::from_amounts(std::array::from_fn(|i| hold[i].min(held[i])))
}

/// An amount as a database integer (saturating).
pub fn signed(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_passed_is_named() {
        let limits = Limits {
            requests: Some(10),
            output_tokens: Some(1000),
            input_tokens: None,
            cost: Some(50),
        };
        let state = WindowState {
            window_ms: 0,
            spent: Spend {
                requests: 4,
                output_tokens: 500,
                input_tokens: 1 << 40,
                cost: 20,
            },
            reserved: Spend {
                requests: 3,
                output_tokens: 100,
                input_tokens: 0,
                cost: 10,
            },
        };
        let fits = Spend {
            requests: 3,
            output_tokens: 400,
            input_tokens: 1 << 40,
            cost: 20,
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
                    cost: Some(20),
                },
                pending: false,
            })
        );
        let too_dear = Spend { cost: 21, ..fits };
        assert!(matches!(
            first_misfit(&limits, &state, &too_dear),
            Some(Reserved::Refused {
                key: "cost",
                left: 20,
                needed: 21,
                ..
            })
        ));
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
            ([2, 0, 0, 0], [-7, 0, 0, 0])
        );
        // Settled: its spend charged, all it held released.
        assert_eq!(
            adjustment(s(3), false, s(3), s(0)),
            ([3, 0, 0, 0], [-3, 0, 0, 0])
        );
        // Lapsed: the 10 it held were charged; a late trim keeps 3 of
        // them charged for the calls still in flight, and the 2 spent.
        assert_eq!(adjustment(s(10), true, s(2), s(3)), ([-5, 0, 0, 0], [0; 4]));
        // A late settle replaces what the lapse charged with the spend.
        assert_eq!(adjustment(s(3), true, s(1), s(0)), ([-2, 0, 0, 0], [0; 4]));
    }

    #[test]
    fn trims_arriving_out_of_order_never_grow_a_reservation() {
        let s = |requests: u64| Spend {
            requests,
            ..Spend::default()
        };
        // A chunk of 10 trimmed to 6 (2 spent), then to 3 (1 more spent);
        // the second trim reaches the database first.
        let mut held = s(10);
        let mut reserved = 10i64;
        let mut spent = 0i64;
        for (charge, hold) in [(s(1), s(3)), (s(2), s(6))] {
            let hold = trimmed(held, hold);
            let (spend, reserve) = adjustment(held, false, charge, hold);
            spent += spend[0];
            reserved += reserve[0];
            held = hold;
            assert!(spent + reserved <= 10, "{spent} + {reserved}");
        }
        assert_eq!((spent, reserved, held), (3, 3, s(3)));
        // In order, the same.
        let held = trimmed(s(10), s(6));
        assert_eq!(trimmed(held, s(3)), s(3));
    }
}

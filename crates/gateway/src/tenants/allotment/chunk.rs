//! A chunk of an allotment: one reservation in the database shared by the
//! calls carved from it, and what those calls hold of it and have spent.

use callai_engine::budget::{Reservation, Spend};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// A chunk older than this takes no more calls, so its room goes back and
/// spend reaches the database at least this often under steady load.
pub(super) const MAX_AGE: Duration = Duration::from_millis(500);

/// One reservation in the database, shared by the calls carved from it.
#[derive(Debug)]
pub(super) struct Chunk {
    pub(super) reservation: Reservation,
    /// What the reservation holds in the database.
    pub(super) held: Spend,
    /// The worst cases of the calls in flight.
    pub(super) carved: Spend,
    /// What its settled calls spent since it was last trimmed (not yet
    /// charged in the database).
    pub(super) spent: Spend,
    pub(super) in_flight: u32,
    pub(super) opened: Instant,
    /// Takes new calls.
    pub(super) open: bool,
    /// A call settled since it was last trimmed.
    pub(super) dirty: bool,
    /// Since when no call of it has been in flight.
    pub(super) idle_since: Option<Instant>,
}

impl Chunk {
    /// Room no call of it holds.
    pub(super) fn free(&self) -> Spend {
        self.held.minus(self.carved.plus(self.spent))
    }

    pub(super) fn fits(&self, worst: &Spend, window_ms: u64) -> bool {
        self.open
            && self.reservation.window_ms == window_ms
            && self.opened.elapsed() < MAX_AGE
            && self.free().covers(worst)
    }

    /// What a trim charges and holds now: its calls' spend, and their
    /// worst cases; the chunk holds that much from here on.
    pub(super) fn take_trim(&mut self) -> (Spend, Spend) {
        let charge = std::mem::take(&mut self.spent);
        self.held = self.carved;
        self.dirty = false;
        (charge, self.carved)
    }
}

#[derive(Debug, Default)]
pub(super) struct Chunks {
    pub(super) chunks: Vec<Chunk>,
    /// Each call in flight: its chunk (by reservation id) and worst case.
    pub(super) carves: HashMap<i64, (i64, Spend)>,
    pub(super) next_carve: i64,
    /// What the database is still to do, in the order it was decided
    /// (see `writes.rs`).
    pub(super) queue: VecDeque<Write>,
}

impl Chunks {
    pub(super) fn carve(&mut self, index: usize, worst: Spend) -> Reservation {
        let chunk = &mut self.chunks[index];
        chunk.carved = chunk.carved.plus(worst);
        chunk.in_flight += 1;
        chunk.idle_since = None;
        let window_ms = chunk.reservation.window_ms;
        let id = self.next_carve;
        self.next_carve += 1;
        self.carves.insert(id, (chunk.reservation.id, worst));
        Reservation { id, window_ms }
    }

    pub(super) fn index(&self, id: i64) -> Option<usize> {
        self.chunks.iter().position(|c| c.reservation.id == id)
    }
}

/// What the database is to do with a chunk, decided under the lock and
/// done after it, in the order decided.
#[derive(Debug)]
pub(super) enum Write {
    Trim(Reservation, Spend, Spend),
    Settle(Reservation, Spend),
}

/// How often calls have been carved, to size the next chunk.
#[derive(Debug)]
pub(super) struct Rate {
    pub(super) since: Instant,
    pub(super) carves: u64,
}

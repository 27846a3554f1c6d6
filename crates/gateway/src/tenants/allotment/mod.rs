//! A host's allotment of a tenant's budget: reservations in the run log's
//! database made a chunk of calls at a time, so that a call's own
//! reservation is a few arithmetic steps in memory instead of a database
//! transaction.
//!
//! A chunk is one reservation in the database, sized to the calls waiting
//! for one and the rate calls have come at (at most [`CHUNK`] worst cases;
//! the ledger grants no more than half of what is left, and one call's
//! worst case when only that fits). Calls carve their worst case out of a
//! chunk and, when they settle, leave what they really spent in it. A
//! chunk takes calls for [`MAX_AGE`] at most; then it is trimmed in the
//! database to what its calls in flight hold (their spend charged, the
//! rest released), and trimmed again as they settle, until the last one
//! settles it. So the database's spent and reserved never pass the budget
//! (every chunk is a reservation that fit), and room a chunk holds that no
//! call of it holds goes back within a chunk's life.
//!
//! No call is refused while there is room for it: one that does not fit
//! first gives back the free room of this host's own chunks, then, if
//! another host holds chunks in the window (the ledger says `pending`),
//! asks again until those have given theirs back ([`RECLAIM`]), and only
//! then is refused. A host that dies holding chunks has them charged in
//! full when they lapse: their calls may have reached the provider, and
//! the chunk is the only bound the database knows.

mod chunk;
mod share;
mod writes;

pub use share::{Allotment, Holder};

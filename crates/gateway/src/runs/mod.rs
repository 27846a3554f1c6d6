//! Pack runs: the ones this host knows ([`RunTable`], each a [`RunEntry`]
//! with its live events), how one is started ([`start`]) and run to its end
//! (its task), read back, and the background work of a serving host
//! (durable runs taken over from a host that died, the run log pruned).

mod background;
mod entry;
mod lookup;
mod retention;
mod start;
pub mod table;
mod takeover;
mod views;
mod work;

pub use background::Background;
pub use entry::{CallCounter, RunEntry};
pub use start::{RunRequest, Started, start};
pub use table::RunTable;
pub use views::{
    Accepted, AttemptsTotal, EventsAnswer, RunAnswer, RunEvent, Status, StatusWord, Tally,
    events_answer, inspected_answer, output_json, recorded_answer, run_error_json,
};

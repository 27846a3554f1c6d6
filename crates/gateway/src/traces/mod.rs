//! The traces of recent calls: each call of `/v1/call`, of the drop-ins
//! and of pack runs, traced as the engine makes it ([`CallTracer`]), kept
//! in memory (the newest `[server] keepCalls`) and in the run log when
//! there is one (pruned with its runs, `[runlog] keepDays`); read back by
//! id or by page, owner-scoped as runs are, and summed per minute.

mod kept;
mod listing;
mod logged;
mod record;
mod store;
mod text;
mod tracer;
mod usage;

pub use listing::{CallPage, PageQuery, TraceJson};
pub use record::{CacheHit, CallTrace, RequestTrace};
pub use store::{CallFilter, CallStore, Found, Listed};
pub use text::{MAX_KEPT_BYTES, TraceText, TracedText};
pub use tracer::{CallTracer, Origin};
pub use usage::{Usage, summary};

//! The retry engine: one ctx.callAI call in, one result or error out, with
//! every provider request counted. A pure state machine decides
//! (`machine.rs`); a driver does (`driver.rs`) with an injected clock,
//! sleeper and random source. No wasm in here: the wasm layer converts WIT
//! types to the wire types and back.

mod attempts;
mod backoff;
mod classify;
mod driver;
mod machine;
mod prompts;
mod reason;
pub(crate) mod recovery;
pub(crate) mod schema;
pub(crate) mod tools;

pub(crate) use driver::{Charging, DriveOptions, Effects, drive};
pub use driver::{Clock, Jitter, Sleeper, TokioTime};
pub(crate) use machine::{CallMachine, CallSpec, Events, Target};
pub use reason::RequestReason;
pub(crate) use schema::{CompiledSchema, SchemaCache};
pub(crate) use tools::CompiledTools;

#[cfg(test)]
mod tests;

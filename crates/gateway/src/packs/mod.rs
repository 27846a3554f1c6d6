//! The packs a server runs: the bundled examples, every component of
//! `--packs DIR` (named by file stem), and uploads. Names live in
//! namespaces: the bundled packs, `--packs` and the admin's uploads are
//! shared (every caller may run them, only the admin changes them), and a
//! tenant's uploads are its own (no other tenant sees, runs, replaces or
//! deletes them; two tenants may each have a pack of one name). Compiled
//! code is shared by content hash, never names: each component is compiled
//! once, off the async workers, at most `[server] maxCompiles` at once (a
//! tenant's uploads wait for each other first, not in front of everyone's),
//! and kept pre-instantiated while a name holds it: a replaced upload's
//! compiled code is dropped from the table, and freed once the last run
//! holding it ends.

mod compile;
mod source;
mod store;
mod upload;

pub use source::{BundledPack, PackSource};
pub use store::{
    CompileLoad, MAX_UPLOADS, MAX_UPLOADS_PER_TENANT, PackInfo, PackStore, valid_name,
};

//! API keys an operator makes while the host runs (`/v1/keys`): each a
//! bearer token (`ck-…`) of a tenant, with limits of its own on top of the
//! tenant's and the providers and models it may reach; kept in the run
//! log's database (the secret only as a keyed hash), known to every host
//! on it through an in-memory table each host keeps fresh.

mod settings;
mod table;

pub use settings::{KeyPatch, KeySettings, NewKey, check, check_name, expiry};
pub use table::{IDLE_REFRESH, KeyEntry, KeySetup, KeyTable, PREFIX, REFRESH, hash};

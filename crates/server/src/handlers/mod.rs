//! The handlers of the callai API's own endpoints, one file per area, each
//! taking only the slice of state it needs; what they share is the
//! `?tenant=` of a request and the scope it gives.

pub mod call;
pub mod keys;
pub mod meta;
pub mod packs;
pub mod runs;
pub mod targets;
mod tenant_query;
pub mod tenants;
pub mod traces;

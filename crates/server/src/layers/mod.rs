//! The layers around the routes: one mechanism ([`around`]) for what is
//! done before a request and after its answer (the access log, the token
//! check, a server without tokens' guard against browser pages, a
//! drop-in's error shape), and `Idempotency-Key` on the routes that take
//! it.

pub mod access_log;
pub mod around;
pub mod auth;
pub mod browser;
pub mod idempotency;

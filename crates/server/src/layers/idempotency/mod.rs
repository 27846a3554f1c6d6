//! `Idempotency-Key` on `/v1/call`, `/v1/chat/completions`, `/v1/messages`
//! and `POST /v1/runs`: the first request with a key runs and its answer is
//! kept in the run log (`[runlog] idempotencyHours`); a repeat of a settled
//! key gets that answer byte for byte, with no provider request and no
//! budget charge; a repeat while the first is in flight waits for it; the
//! same key with another body (or other `x-callai-*` policy headers) is
//! `422`. Keys are the caller's own: two tenants' keys never meet. With
//! `[responseCache]` on, a call's or a drop-in's request without a key is
//! keyed by its own fingerprint, and an identical one within the cache's
//! `ttl` gets its answer (`cache.rs`).

mod cache;
mod keyed;
mod layer;

pub use keyed::Keyed;
pub use layer::KeyedLayer;

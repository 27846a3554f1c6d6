//! `Idempotency-Key` on `/v1/call`, `/v1/chat/completions`, `/v1/messages`
//! and `POST /v1/runs`: the first request with a key runs and its answer is
//! kept in the run log (`[runlog] idempotencyHours`); a repeat of a settled
//! key gets that answer byte for byte, with no provider request and no
//! budget charge; a repeat while the first is in flight waits for it; the
//! same key with another body (or other `x-callai-*` policy headers) is
//! `422`. Keys are the caller's own: two tenants' keys never meet.

mod keyed;
mod layer;

pub use keyed::Keyed;
pub use layer::KeyedLayer;

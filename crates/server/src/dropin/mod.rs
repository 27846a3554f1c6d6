//! The drop-in endpoints: the OpenAI Chat Completions API
//! (`POST /v1/chat/completions`), the OpenAI Responses API
//! (`POST /v1/responses`), the Anthropic Messages API
//! (`POST /v1/messages`) and the model list (`GET /v1/models`), so that the
//! clients people already have work against `callai serve` unchanged but for
//! their base URL. Each API is a [`DropinApi`]: its request mapped onto the
//! engine's typed request, its answers, streams and errors in its own
//! shape; one [`handler::handle`] serves them all. Each call goes through the
//! gateway's one call path as `/v1/call` does (the same admission, limits, events, metrics
//! and traces), and RFC 0248 travels in an extension strict clients
//! ignore: `"callai": {"attempts"}` in the body and the `x-callai-*`
//! headers. `usage` keeps its meaning, the final attempt's, in the API's
//! own field names.

mod anthropic;
mod api;
mod embeddings;
mod error;
mod handler;
mod images;
mod openai;
mod outcome;
mod parts;
mod responses;
mod sse;
mod streaming;

pub use anthropic::Anthropic;
pub use api::Api;
pub use embeddings::Embeddings;
pub use error::Reshape;
pub use handler::{count_client_retry, handle};
pub use openai::{OpenAi, models};
pub use responses::{
    create as create_response, delete as delete_response, get as get_response,
    input_items as response_input_items,
};

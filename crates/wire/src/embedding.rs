//! An embedding call (`POST /v1/embeddings`): what it asks a provider to
//! embed, carried beside a [`CallRequest`](crate::CallRequest) whose one
//! user message holds the input's text (what the host sizes and reserves
//! input tokens by). The vectors come back as the provider sent them: a
//! call's result `content` is the provider's `data` array, as JSON.

use serde::Serialize;
use serde_json::Value;

/// What an embedding call sends its provider beside the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Embedding {
    /// A string, a list of strings, or token arrays, as the client sent it.
    pub input: Value,
    /// The vectors' length, for a model that takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    /// `float` or `base64`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding_format: Option<String>,
    /// The client's end user, passed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

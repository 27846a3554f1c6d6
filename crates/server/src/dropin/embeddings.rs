//! `POST /v1/embeddings`: the OpenAI Embeddings API, through the engine as
//! every other call (routes and fallback chains, retries of transient
//! failures counted as attempts, budgets, prices, traces): a call whose
//! provider operation is an embedding. Its input (a string, strings, or
//! token arrays) goes to the provider as the client sent it; its one user
//! message is that input's JSON text, which the host sizes the call by (a
//! token is never less than a byte of it). The answer is the provider's
//! `data` as it sent it, with `usage` (the input tokens it reported) and
//! the `callai` extension.

use super::api::{AnswerExtension, Api, DropinApi, Extension, Mapped, Streaming};
use super::openai::{ChatFramer, OpenAi};
use crate::error::ApiError;
use callai_engine::wire::{CallRequest, CallResult, Embedding, Message};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

/// An Embeddings request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsRequest {
    model: String,
    input: Value,
    dimensions: Option<u32>,
    encoding_format: Option<String>,
    user: Option<String>,
    /// The RFC 0248 extension (`extra_body={"callai": {...}}`).
    callai: Option<Extension>,
}

/// Refuses an `input` an embedding cannot be made of, naming it: it is a
/// non-empty string, or a non-empty list of non-empty strings, of token
/// ids, or of non-empty lists of token ids.
fn check_input(input: &Value) -> Result<(), ApiError> {
    let token = |v: &Value| v.as_u64().is_some_and(|n| n <= u64::from(u32::MAX));
    let tokens = |v: &Value| {
        v.as_array()
            .is_some_and(|a| !a.is_empty() && a.iter().all(token))
    };
    let text = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    let fits = match input {
        Value::String(s) => !s.is_empty(),
        Value::Array(items) if !items.is_empty() => {
            items.iter().all(text) || items.iter().all(token) || items.iter().all(tokens)
        }
        _ => false,
    };
    match fits {
        true => Ok(()),
        false => Err(ApiError::invalid(
            "input",
            "must be a non-empty string, or a non-empty list of non-empty strings, of token ids, \
             or of non-empty token arrays",
        )),
    }
}

/// The OpenAI Embeddings API.
pub struct Embeddings;

/// A list of embeddings, with the extension.
#[derive(Serialize)]
pub struct EmbeddingList<'a> {
    callai: AnswerExtension,
    data: Box<RawValue>,
    model: &'a str,
    object: &'static str,
    usage: EmbeddingUsage,
}

/// `usage`: the input tokens the provider reported (0 when it said none).
#[derive(Serialize)]
struct EmbeddingUsage {
    prompt_tokens: u32,
    total_tokens: u32,
}

impl DropinApi for Embeddings {
    const API: Api = Api::Embeddings;
    const ID_PREFIX: &'static str = "emb_";
    type Request = EmbeddingsRequest;
    // An embedding is never streamed: the chat framer stands in, unused.
    type Framer = ChatFramer;
    type Echo = ();

    fn map(r: EmbeddingsRequest) -> Result<(Mapped, ()), ApiError> {
        check_input(&r.input)?;
        match r.encoding_format.as_deref() {
            None | Some("float" | "base64") => {}
            Some(other) => {
                return Err(ApiError::invalid(
                    "encoding_format",
                    format!("{other:?}: must be float or base64"),
                ));
            }
        }
        if r.dimensions == Some(0) {
            return Err(ApiError::invalid("dimensions", "must be at least 1"));
        }
        let request = CallRequest {
            messages: vec![Message::user(r.input.to_string())],
            // An embedding generates nothing: one token of output is what
            // each attempt holds of a budget, and none is charged.
            max_tokens: Some(1),
            embedding: Some(Arc::new(Embedding {
                input: r.input,
                dimensions: r.dimensions,
                encoding_format: r.encoding_format,
                user: r.user,
            })),
            ..CallRequest::default()
        };
        let mapped = Mapped {
            request,
            extension: r.callai.unwrap_or_default(),
            streaming: Streaming::Off,
            model: r.model,
        };
        Ok((mapped, ()))
    }

    fn answer<'a>(
        model: &'a str,
        _: &'a str,
        result: &'a CallResult,
        callai: AnswerExtension,
        (): &'a (),
    ) -> impl Serialize + 'a {
        let text = result.content.clone().unwrap_or_else(|| "[]".to_owned());
        // The provider's own `data`, checked JSON when its answer was read.
        let data = RawValue::from_string(text)
            .unwrap_or_else(|_| RawValue::from_string("[]".to_owned()).expect("[] is JSON"));
        let input = result
            .usage
            .as_ref()
            .and_then(|u| u.input_tokens)
            .unwrap_or(0);
        EmbeddingList {
            callai,
            data,
            model,
            object: "list",
            usage: EmbeddingUsage {
                prompt_tokens: input,
                total_tokens: input,
            },
        }
    }

    fn framer(
        model: String,
        id: String,
        streaming: Streaming,
        settled: Option<&CallResult>,
        (): (),
    ) -> ChatFramer {
        OpenAi::framer(model, id, streaming, settled, ())
    }
}

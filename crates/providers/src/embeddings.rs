//! How a wire format's provider serves embeddings ([`EmbeddingsFormat`]),
//! and OpenAI's way (`POST /embeddings`, as OpenAI, Ollama and most
//! compatible servers serve it): the body, and the answer read as far as
//! the engine needs it (the `data` array kept as the provider sent it, its
//! usage, its model).

use crate::adapter::ModelPath;
use crate::usage::{Tokens, nullable};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use callai_wire::Embedding;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// How a provider serves embeddings: where, with what body, and how its
/// answer becomes a reply whose content is OpenAI's `data` array.
pub trait EmbeddingsFormat: Send + Sync + 'static {
    /// Whether it serves any.
    const SERVES: bool = true;
    /// Its answer, typed.
    type Answer: DeserializeOwned + Send;
    /// The endpoint under the base URL for `model`, or why it has none.
    fn path(model: &str) -> Result<ModelPath, String>;
    /// The request body, or why this input cannot be sent.
    fn body(model: &str, embedding: &Embedding) -> Result<Vec<u8>, String>;
    /// The reply its answer makes to `embedding`.
    fn reply(answer: Self::Answer, embedding: &Embedding)
    -> Result<ProviderReply, ProviderFailure>;
}

/// A provider that serves no embeddings (Anthropic's Messages API).
#[derive(Debug)]
pub struct NoEmbeddings;

impl EmbeddingsFormat for NoEmbeddings {
    const SERVES: bool = false;
    type Answer = serde::de::IgnoredAny;

    fn path(_: &str) -> Result<ModelPath, String> {
        Err("this provider serves no embeddings".into())
    }

    fn body(_: &str, _: &Embedding) -> Result<Vec<u8>, String> {
        Err("this provider serves no embeddings".into())
    }

    fn reply(_: Self::Answer, _: &Embedding) -> Result<ProviderReply, ProviderFailure> {
        let why = "this provider serves no embeddings";
        Err(ProviderFailure::new(FailureKind::Unanswerable, None, why))
    }
}

/// OpenAI's `POST /embeddings`.
#[derive(Debug)]
pub struct OpenAiEmbeddings;

impl EmbeddingsFormat for OpenAiEmbeddings {
    type Answer = Answer;

    fn path(_: &str) -> Result<ModelPath, String> {
        Ok(("/embeddings".into(), &[]))
    }

    fn body(model: &str, embedding: &Embedding) -> Result<Vec<u8>, String> {
        let body = Body { model, embedding };
        Ok(serde_json::to_vec(&body).expect("an embedding body always serialises"))
    }

    fn reply(answer: Answer, _: &Embedding) -> Result<ProviderReply, ProviderFailure> {
        Ok(reply(answer))
    }
}

/// The request body: the model, then the client's input and options.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(flatten)]
    embedding: &'a Embedding,
}

/// An embeddings answer, as far as this host reads it.
#[derive(Deserialize)]
pub struct Answer {
    data: Box<RawValue>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    usage: Option<EmbeddingUsage>,
}

#[derive(Default, Deserialize)]
struct EmbeddingUsage {
    #[serde(default)]
    prompt_tokens: Tokens,
}

/// The reply of `answer`: its `data` as the content, its input tokens as
/// reported (and no output: an embedding generates none), when it reported
/// usage.
fn reply(answer: Answer) -> ProviderReply {
    let input = answer.usage.and_then(|u| u.prompt_tokens.0);
    embedded(answer.data.get().to_owned(), input, answer.model)
}

/// The reply of embeddings whose OpenAI `data` array is `content`, with
/// the input tokens the provider reported (and no output: an embedding
/// generates none) when it reported them.
pub(crate) fn embedded(
    content: String,
    input: Option<u32>,
    model: Option<String>,
) -> ProviderReply {
    ProviderReply {
        content,
        tool_calls: Vec::new(),
        stop: StopReason::Stop,
        input_tokens: input,
        cached_input_tokens: None,
        cache_write_input_tokens: None,
        reasoning_tokens: None,
        output_tokens: input.map(|_| 0),
        model,
        status: None,
        thinking: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_its_data_as_sent_and_counts_its_input() {
        let answer: Answer = serde_json::from_str(
            r#"{"object": "list", "model": "e-1",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -1]}],
                "usage": {"prompt_tokens": 4, "total_tokens": 4}}"#,
        )
        .unwrap();
        let reply = reply(answer);
        assert_eq!(
            reply.content,
            r#"[{"object": "embedding", "index": 0, "embedding": [0.5, -1]}]"#
        );
        assert_eq!(
            (reply.input_tokens, reply.output_tokens),
            (Some(4), Some(0))
        );
        assert_eq!(reply.model.as_deref(), Some("e-1"));
        let bare: Answer = serde_json::from_str(r#"{"data": []}"#).unwrap();
        let reply = super::reply(bare);
        assert_eq!(
            (reply.input_tokens, reply.output_tokens),
            (None, None),
            "no usage: unknown"
        );
    }
}

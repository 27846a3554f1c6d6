//! Embeddings from an OpenAI-compatible provider (`POST /embeddings`, as
//! OpenAI, Ollama and most compatible servers serve it): the body, and the
//! answer read as far as the engine needs it (the `data` array kept as the
//! provider sent it, its usage, its model).

use crate::usage::{Tokens, nullable};
use callai_engine::{ProviderReply, StopReason};
use callai_wire::Embedding;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The request body: the model, then the client's input and options.
#[derive(Serialize)]
pub(crate) struct Body<'a> {
    pub model: &'a str,
    #[serde(flatten)]
    pub embedding: &'a Embedding,
}

/// An embeddings answer, as far as this host reads it.
#[derive(Deserialize)]
pub(crate) struct Answer {
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
pub(crate) fn reply(answer: Answer) -> ProviderReply {
    let input = answer.usage.and_then(|u| u.prompt_tokens.0);
    ProviderReply {
        content: answer.data.get().to_owned(),
        tool_calls: Vec::new(),
        stop: StopReason::Stop,
        input_tokens: input,
        cached_input_tokens: None,
        cache_write_input_tokens: None,
        reasoning_tokens: None,
        output_tokens: input.map(|_| 0),
        model: answer.model,
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

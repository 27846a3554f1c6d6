//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp
//! server, LM Studio). Native structured output is
//! `response_format: {type: "json_schema"}`.

mod answer;

use super::adapter::{Delivery, WireFormat};
use super::http::ApiKey;
use answer::{Chunk, Completion, Folded};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{Role, StructuredOutput};
use serde::Serialize;
use serde_json::Value;

/// The OpenAI chat-completions wire format.
#[derive(Debug)]
pub struct OpenAiWire;

/// A chat-completions request body, borrowing from the request.
#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<ChatMessage<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'static str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl WireFormat for OpenAiWire {
    const PATH: &'static str = "/chat/completions";
    const NATIVE_TERMS: &'static [&'static str] = &["response_format", "json_schema"];

    fn headers(key: Option<&ApiKey>) -> Vec<(&'static str, String)> {
        key.map(|k| ("authorization", format!("Bearer {}", k.expose())))
            .into_iter()
            .collect()
    }

    fn body(model: &str, r: &ProviderRequest, delivery: Delivery) -> Vec<u8> {
        let role = |role: Role| match role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        };
        let system = r.system_prompt.as_deref().map(|content| ChatMessage {
            role: "system",
            content,
        });
        let messages = system
            .into_iter()
            .chain(r.messages.iter().map(|m| ChatMessage {
                role: role(m.role),
                content: &m.content,
            }))
            .collect();
        let response_format = r
            .structured
            .as_ref()
            .filter(|s| s.mode == StructuredOutput::Native)
            .map(|s| ResponseFormat {
                kind: "json_schema",
                json_schema: JsonSchemaFormat {
                    name: "response",
                    schema: &s.schema,
                    strict: false,
                },
            });
        let streamed = delivery == Delivery::Streamed;
        let body = ChatBody {
            model: r.model.as_deref().unwrap_or(model),
            messages,
            max_tokens: r.max_tokens,
            temperature: r.temperature,
            stop: &r.stop_sequences,
            response_format,
            stream: streamed,
            stream_options: streamed.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        serde_json::to_vec(&body).expect("a chat body serializes")
    }

    type Answer = Completion;
    type Event = Chunk;
    type Folded = Folded;

    fn reply(answer: Completion) -> Result<ProviderReply, ProviderFailure> {
        answer.into_reply()
    }

    /// A `chat.completion.chunk`: its delta's text, finish reason, model,
    /// and (in the last chunk, asked for with `include_usage`) usage.
    fn fold(acc: &mut Folded, event: Chunk) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(acc: &mut Folded) {
        acc.done();
    }

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply()
    }
}

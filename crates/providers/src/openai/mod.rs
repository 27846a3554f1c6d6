//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp
//! server, LM Studio). Native structured output is
//! `response_format: {type: "json_schema"}`.

use super::adapter::{Delivery, WireFormat};
use super::http::{ApiKey, tokens};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, ProviderRequest, StopReason};
use callai_wire::{Role, StructuredOutput};
use serde::Serialize;
use serde_json::{Value, json};

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

    /// Reads a chat-completions response.
    fn reply(response: &Value) -> Result<ProviderReply, ProviderFailure> {
        let choice = response.pointer("/choices/0").ok_or_else(|| {
            ProviderFailure::new(
                FailureKind::Transient,
                Some(200),
                "the response has no choices",
            )
        })?;
        let message = &choice["message"];
        let refusal = message["refusal"].as_str().filter(|r| !r.is_empty());
        let stop = match (refusal, choice["finish_reason"].as_str()) {
            (Some(_), _) => StopReason::Refusal,
            (None, Some("stop")) => StopReason::Stop,
            (None, Some("length")) => StopReason::Length,
            (None, Some("content_filter")) => StopReason::ContentFilter,
            (None, Some("tool_calls" | "function_call")) => StopReason::ToolCall,
            _ => StopReason::Other,
        };
        let content = refusal.or(message["content"].as_str()).unwrap_or_default();
        let usage = response.get("usage");
        Ok(ProviderReply {
            content: content.to_owned(),
            stop,
            input_tokens: tokens(usage.and_then(|u| u.get("prompt_tokens"))),
            output_tokens: tokens(usage.and_then(|u| u.get("completion_tokens"))),
            model: response["model"].as_str().map(str::to_owned),
            status: None,
        })
    }

    fn stream_start() -> Value {
        json!({"choices": [{"message": {"content": ""}, "finish_reason": null}]})
    }

    /// A `chat.completion.chunk`: its delta's text, finish reason, model,
    /// and (in the last chunk, asked for with `include_usage`) usage.
    fn fold_event(acc: &mut Value, event: &Value) -> Result<Option<String>, ProviderFailure> {
        if let Some(error) = event.get("error") {
            let message = error["message"]
                .as_str()
                .unwrap_or("an error in the stream");
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                format!("the provider's stream failed: {message}"),
            ));
        }
        if let Some(model) = event.get("model").filter(|m| m.is_string()) {
            acc["model"] = model.clone();
        }
        if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
            acc["usage"] = usage.clone();
        }
        let Some(choice) = event.pointer("/choices/0") else {
            return Ok(None);
        };
        let slot = &mut acc["choices"][0];
        if let Some(reason) = choice["finish_reason"].as_str() {
            slot["finish_reason"] = reason.into();
        }
        if let Some(refusal) = choice.pointer("/delta/refusal").and_then(Value::as_str) {
            let before = slot["message"]["refusal"].as_str().unwrap_or_default();
            slot["message"]["refusal"] = format!("{before}{refusal}").into();
        }
        let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) else {
            return Ok(None);
        };
        let before = slot["message"]["content"].as_str().unwrap_or_default();
        slot["message"]["content"] = format!("{before}{text}").into();
        Ok(Some(text.to_owned()))
    }
}

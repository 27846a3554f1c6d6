//! The Anthropic Messages API. Native structured output is a forced tool
//! call whose input schema is the caller's `responseSchema`.

use super::adapter::{Delivery, WireFormat};
use super::http::{ApiKey, tokens};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, ProviderRequest, StopReason};
use callai_wire::{Role, StructuredOutput};
use serde::Serialize;
use serde_json::{Value, json};
use std::borrow::Cow;

/// The API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The forced tool of native structured output.
const TOOL: &str = "respond";

/// The Anthropic Messages API wire format.
#[derive(Debug)]
pub struct AnthropicWire;

/// A Messages API request body, borrowing from the request where it can.
#[derive(Serialize)]
struct MessagesBody<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tool<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// One turn; consecutive turns of one role are merged into one.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Cow<'a, str>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'static str,
    description: &'static str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct ToolChoice {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'static str,
}

impl WireFormat for AnthropicWire {
    const PATH: &'static str = "/messages";
    const NATIVE_TERMS: &'static [&'static str] = &["tool_choice", "tools", "input_schema"];

    fn headers(key: Option<&ApiKey>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(k) = key {
            headers.push(("x-api-key", k.expose().to_owned()));
        }
        headers
    }

    /// The request body for one attempt. System-role messages join the
    /// system prompt; consecutive turns of one role are merged.
    fn body(model: &str, r: &ProviderRequest, delivery: Delivery) -> Vec<u8> {
        let mut system: Vec<&str> = r.system_prompt.iter().map(String::as_str).collect();
        let mut messages: Vec<Turn<'_>> = Vec::new();
        for m in &r.messages {
            let role = match m.role {
                Role::System => {
                    system.push(&m.content);
                    continue;
                }
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            match messages.last_mut() {
                Some(last) if last.role == role => {
                    let text = last.content.to_mut();
                    text.push_str("\n\n");
                    text.push_str(&m.content);
                }
                _ => messages.push(Turn {
                    role,
                    content: Cow::Borrowed(&m.content),
                }),
            }
        }
        let native = r
            .structured
            .as_ref()
            .filter(|s| s.mode == StructuredOutput::Native);
        let body = MessagesBody {
            model: r.model.as_deref().unwrap_or(model),
            max_tokens: r.max_tokens,
            messages,
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            temperature: r.temperature,
            stop_sequences: &r.stop_sequences,
            tools: native.map(|s| {
                [Tool {
                    name: TOOL,
                    description: "Respond with a value that satisfies the input schema.",
                    input_schema: &s.schema,
                }]
            }),
            tool_choice: native.map(|_| ToolChoice {
                kind: "tool",
                name: TOOL,
            }),
            stream: delivery == Delivery::Streamed,
        };
        serde_json::to_vec(&body).expect("a messages body serializes")
    }

    /// Reads a Messages API response: the forced tool call's input (as JSON
    /// text) when there is one, else the text blocks.
    fn reply(response: &Value) -> Result<ProviderReply, ProviderFailure> {
        let blocks = response["content"].as_array().ok_or_else(|| {
            ProviderFailure::new(
                FailureKind::Transient,
                Some(200),
                "the response has no content",
            )
        })?;
        let tool_input = blocks
            .iter()
            .find(|b| b["type"] == "tool_use" && b["name"] == TOOL)
            .map(|b| b["input"].to_string());
        let content = tool_input.unwrap_or_else(|| {
            blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        });
        let stop = match response["stop_reason"].as_str() {
            Some("end_turn" | "stop_sequence" | "tool_use") => StopReason::Stop,
            Some("max_tokens") => StopReason::Length,
            Some("refusal") => StopReason::Refusal,
            _ => StopReason::Other,
        };
        let usage = response.get("usage");
        Ok(ProviderReply {
            content,
            stop,
            input_tokens: tokens(usage.and_then(|u| u.get("input_tokens"))),
            output_tokens: tokens(usage.and_then(|u| u.get("output_tokens"))),
            model: response["model"].as_str().map(str::to_owned),
            status: None,
        })
    }

    fn stream_start() -> Value {
        json!({"content": [], "usage": {}})
    }

    /// One Messages API event: the message's start (model, input usage),
    /// its blocks and their text, its end (stop reason, output usage).
    fn fold_event(acc: &mut Value, event: &Value) -> Result<Option<String>, ProviderFailure> {
        let merge_usage = |acc: &mut Value, usage: Option<&Value>| {
            if let Some(Value::Object(usage)) = usage {
                for (k, v) in usage {
                    acc["usage"][k] = v.clone();
                }
            }
        };
        match event["type"].as_str() {
            Some("message_start") => {
                acc["model"] = event["message"]["model"].clone();
                merge_usage(acc, event["message"].get("usage"));
            }
            Some("content_block_start") => {
                if let Some(blocks) = acc["content"].as_array_mut() {
                    blocks.push(event["content_block"].clone());
                }
            }
            Some("content_block_delta") => {
                let index = event["index"].as_u64().unwrap_or(0) as usize;
                let delta = &event["delta"];
                if delta["type"] == "text_delta"
                    && let Some(text) = delta["text"].as_str()
                {
                    let block = &mut acc["content"][index];
                    let before = block["text"].as_str().unwrap_or_default();
                    block["text"] = format!("{before}{text}").into();
                    return Ok(Some(text.to_owned()));
                }
            }
            Some("message_delta") => {
                acc["stop_reason"] = event["delta"]["stop_reason"].clone();
                merge_usage(acc, event.get("usage"));
            }
            Some("error") => {
                let message = event["error"]["message"]
                    .as_str()
                    .unwrap_or("an error in the stream");
                return Err(ProviderFailure::new(
                    FailureKind::Transient,
                    None,
                    format!("the provider's stream failed: {message}"),
                ));
            }
            _ => {}
        }
        Ok(None)
    }
}

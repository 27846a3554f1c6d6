//! The Anthropic Messages API. Native structured output is a forced tool
//! call whose input schema is the caller's `responseSchema`.

mod answer;

use super::adapter::{Delivery, WireFormat};
use super::http::ApiKey;
use answer::{Event, Folded, Message};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{Role, StructuredOutput};
use serde::Serialize;
use serde_json::Value;
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

    type Answer = Message;
    type Event = Event;
    type Folded = Folded;

    /// Reads a Messages API response: the forced tool call's input (as JSON
    /// text) when there is one, else the text blocks.
    fn reply(answer: Message) -> Result<ProviderReply, ProviderFailure> {
        answer.into_reply()
    }

    /// One Messages API event: the message's start (model, input usage),
    /// its blocks and their text, its end (stop reason, output usage).
    fn fold(acc: &mut Folded, event: Event) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(_: &mut Folded) {}

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply()
    }
}

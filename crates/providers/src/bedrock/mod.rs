//! Amazon Bedrock's Converse API (`bedrock-runtime`'s
//! `/model/MODEL/converse` and `/converse-stream`), which speaks for every
//! model Bedrock offers through it: the system prompt apart, the
//! conversation as `user` and `assistant` turns of content blocks (text,
//! images as bytes, `toolUse`, `toolResult`), the attempt's budget as
//! `inferenceConfig.maxTokens`, the call's tools as `toolConfig`, and
//! native structured output as a forced tool (`respond`), as on
//! Anthropic's own API. Requests are signed with SigV4 ([`sign`]) or
//! carry a Bedrock API key as a bearer token.

mod answer;
pub(crate) mod sign;
#[cfg(test)]
mod tests;

use super::adapter::{Delivery, ModelPath, WireFormat};
use super::http::ApiKey;
use super::upstream::{KeyHeader, Upstream};
use answer::{Converse, Event, Folded};
use callai_engine::config::{ConfigError, invalid};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{ImageSource, Message, Role, StructuredOutput, ToolChoice as Choice};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The forced tool of native structured output.
const TOOL: &str = "respond";

/// The Converse wire format.
#[derive(Debug)]
pub struct BedrockWire;

/// A Converse request body, borrowing from the request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Text<'a>>,
    inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    /// The config's `extraBody` (`additionalModelRequestFields`,
    /// `guardrailConfig`, …).
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct Text<'a> {
    text: Cow<'a, str>,
}

#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(Cow<'a, str>),
    Image {
        format: &'a str,
        source: Bytes<'a>,
    },
    #[serde(rename_all = "camelCase")]
    ToolUse {
        tool_use_id: &'a str,
        name: &'a str,
        input: Cow<'a, RawValue>,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        tool_use_id: &'a str,
        content: [Text<'a>; 1],
    },
}

/// An image's bytes, base64 as JSON carries them.
#[derive(Serialize)]
struct Bytes<'a> {
    bytes: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig<'a> {
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool<'a> {
    tool_spec: ToolSpec<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: Json<'a>,
}

#[derive(Serialize)]
struct Json<'a> {
    json: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ToolChoice<'a> {
    Auto {},
    Any {},
    Tool { name: &'a str },
}

/// The blocks of message `m`: images first, then its text, then its tool
/// calls; a tool's result is a `toolResult`. An image must be inline
/// bytes ([`BedrockWire::unsendable`] refuses a URL before a request).
fn blocks(m: &Message) -> Vec<Block<'_>> {
    if m.role == Role::Tool {
        return vec![Block::ToolResult {
            tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
            content: [Text {
                text: Cow::Borrowed(&m.content),
            }],
        }];
    }
    let images = m.images.iter().filter_map(|image| match image.source() {
        Ok(ImageSource::Data { media_type, base64 }) => Some(Block::Image {
            format: media_type.strip_prefix("image/").unwrap_or(media_type),
            source: Bytes { bytes: base64 },
        }),
        _ => None,
    });
    let text = (!m.content.is_empty()).then(|| Block::Text(Cow::Borrowed(&m.content)));
    images
        .chain(text)
        .chain(m.tool_calls.iter().map(|c| Block::ToolUse {
            tool_use_id: &c.id,
            name: &c.name,
            input: super::adapter::object(&c.arguments),
        }))
        .collect()
}

/// The tool config: the call's tools and, for native structured output,
/// the `respond` tool (forced when the call offers none). Converse has no
/// `none` choice: a call that allows no tool sends none, unless earlier
/// turns used them (Bedrock then needs them declared).
fn tool_config<'a>(r: &'a ProviderRequest, native: Option<&'a Value>) -> Option<ToolConfig<'a>> {
    let offered = r.tools.as_ref();
    let used = r
        .messages
        .iter()
        .any(|m| m.role == Role::Tool || !m.tool_calls.is_empty());
    let none = offered.is_none_or(|t| t.choice == Choice::None);
    if none && native.is_none() && !used {
        return None;
    }
    let spec = |name, description, schema| Tool {
        tool_spec: ToolSpec {
            name,
            description,
            input_schema: Json { json: schema },
        },
    };
    let mut tools: Vec<Tool<'a>> = offered
        .map(|t| {
            t.tools
                .iter()
                .map(|tool| spec(&tool.name, tool.description.as_deref(), &tool.parameters))
                .collect()
        })
        .unwrap_or_default();
    if let Some(schema) = native {
        let what = Some("Respond with a value that satisfies the input schema.");
        tools.push(spec(TOOL, what, schema));
    }
    let tool_choice = match (offered.map(|t| &t.choice), native) {
        (None | Some(Choice::None), Some(_)) => Some(ToolChoice::Tool { name: TOOL }),
        (None | Some(Choice::None), None) => None,
        (Some(Choice::Auto), None) => Some(ToolChoice::Auto {}),
        (Some(Choice::Auto | Choice::Required), Some(_)) | (Some(Choice::Required), None) => {
            Some(ToolChoice::Any {})
        }
        (Some(Choice::Tool(name)), _) => Some(ToolChoice::Tool { name }),
    };
    Some(ToolConfig { tools, tool_choice })
}

/// The model ID as one path segment: Bedrock's IDs hold `:` (a version)
/// and an ARN `/`, both percent-encoded, as AWS's SDKs send them.
fn segment(model: &str) -> String {
    url::form_urlencoded::byte_serialize(model.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Checks the section `name`'s `region` is spelt as AWS spells one.
pub(crate) fn check_region(name: &str, region: &str) -> Result<(), ConfigError> {
    let plain = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    match plain {
        true => Ok(()),
        false => Err(invalid(
            &format!("providers.{name}.region"),
            format!("is lower-case letters, digits and '-', got {region:?}"),
        )),
    }
}

impl WireFormat for BedrockWire {
    /// Unused: every endpoint names its model ([`WireFormat::path_for`]).
    const PATH: &'static str = "/model";
    const NATIVE_TERMS: &'static [&'static str] = &["toolChoice", "toolConfig", "tool_choice"];
    type Embeddings = crate::embeddings::NoEmbeddings;

    fn path_for(model: &str, delivery: Delivery) -> Option<Result<ModelPath, String>> {
        if model.is_empty() || model.chars().any(char::is_control) {
            return Some(Err(format!(
                "the model {model:?} is not a Bedrock model ID"
            )));
        }
        let action = match delivery {
            Delivery::Whole => "converse",
            Delivery::Streamed => "converse-stream",
        };
        Some(Ok((format!("/model/{}/{action}", segment(model)), &[])))
    }

    /// A Bedrock API key is a bearer token; SigV4 signs each request when
    /// there is none.
    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        key.map(|k| key_header.header(k.expose()))
            .into_iter()
            .collect()
    }

    fn unsendable(request: &ProviderRequest) -> Option<String> {
        let url = request.messages.iter().enumerate().find_map(|(i, m)| {
            let j = m
                .images
                .iter()
                .position(|image| !matches!(image.source(), Ok(ImageSource::Data { .. })))?;
            Some((i, j))
        });
        url.map(|(i, j)| {
            format!(
                "messages[{i}].images[{j}]: Bedrock takes an image's bytes, not a URL (send it \
                 as a data: URL)"
            )
        })
    }

    /// The request body for one attempt: system-role messages join the
    /// system prompt; consecutive turns of one role are merged.
    fn body(_model: &str, r: &ProviderRequest, _: Delivery, upstream: &Upstream) -> Vec<u8> {
        let mut system: Vec<&str> = r.system_prompt.iter().map(String::as_str).collect();
        let mut messages: Vec<Turn<'_>> = Vec::new();
        for m in &r.messages {
            let role = match m.role {
                Role::System => {
                    system.push(&m.content);
                    continue;
                }
                // A tool's result is the user's turn.
                Role::User | Role::Tool => "user",
                Role::Assistant => "assistant",
            };
            let blocks = blocks(m);
            match messages.last_mut() {
                Some(last) if last.role == role => last.content.extend(blocks),
                _ => messages.push(Turn {
                    role,
                    content: blocks,
                }),
            }
        }
        let native = r
            .structured
            .as_ref()
            .filter(|s| s.mode == StructuredOutput::Native);
        let body = Body {
            messages,
            system: (!system.is_empty())
                .then(|| Text {
                    text: Cow::Owned(system.join("\n\n")),
                })
                .into_iter()
                .collect(),
            inference_config: InferenceConfig {
                max_tokens: r.max_tokens,
                temperature: r.temperature,
                stop_sequences: &r.stop_sequences,
            },
            tool_config: tool_config(r, native.map(|s| &*s.schema)),
            extra: &upstream.extra_body,
        };
        serde_json::to_vec(&body).expect("a Converse body serializes")
    }

    type Answer = Converse;
    type Event = Event;
    type Folded = Folded;

    fn reply(answer: Converse) -> Result<ProviderReply, ProviderFailure> {
        answer.into_reply()
    }

    fn event(kind: &str, data: &str) -> serde_json::Result<Event> {
        Event::read(kind, data)
    }

    fn fold(acc: &mut Folded, event: Event) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(_: &mut Folded) {}

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply()
    }

    /// A native structured request's answer is the input of its `respond`
    /// call: that call is the reply's text, not a tool call.
    fn settle(reply: &mut ProviderReply, request: &ProviderRequest) {
        super::adapter::settle_forced_tool(reply, request, TOOL);
    }
}

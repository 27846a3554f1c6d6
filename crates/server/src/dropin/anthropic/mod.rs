//! `POST /v1/messages`: the Anthropic Messages API, mapped onto a ctx.callAI
//! request. Structured output is the Messages API's own JSON-schema output
//! (`output_config.format`, as the `anthropic` client 2.x sends it; the
//! beta's `output_format` is read too). Client tools, `tool_use` and
//! `tool_result` blocks are the engine's tool calls; `cache_control`
//! breakpoints (`cache`) and extended thinking (`thinking`, and the
//! thinking blocks of earlier turns) go on to an Anthropic-kind provider.
//! Server tools and other content are refused naming them; `metadata`,
//! `top_p`, `top_k` and `service_tier` are dropped.

mod answer;
mod cache;
mod thinking;
mod tools;

pub use answer::MessageFramer;

use super::api::{AnswerExtension, Api, DropinApi, Extension, Mapped, Streaming};
use super::parts::{TextOrParts, text_of, text_or_parts};
use crate::error::ApiError;
use answer::{MessageAnswer, Usage, content, stop_reason, usage};
use callai_engine::wire::{CallRequest, CallResult, Role, ThinkingConfig};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tools::{AnthropicChoice, AnthropicTool};

/// A Messages request, as far as this host reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesRequest {
    model: String,
    max_tokens: u32,
    messages: Vec<AnthropicMessage>,
    #[serde(default, deserialize_with = "optional_blocks")]
    system: Option<TextOrParts>,
    stop_sequences: Option<Vec<String>>,
    temperature: Option<f64>,
    stream: Option<bool>,
    output_config: Option<OutputConfig>,
    output_format: Option<OutputFormat>,
    tools: Option<Vec<AnthropicTool>>,
    tool_choice: Option<AnthropicChoice>,
    thinking: Option<ThinkingConfig>,
    // Refused when present.
    container: Option<Value>,
    mcp_servers: Option<Value>,
    // Dropped: they do not change what the answer means.
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(rename = "top_p")]
    _top_p: Option<IgnoredAny>,
    #[serde(rename = "top_k")]
    _top_k: Option<IgnoredAny>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    /// The RFC 0248 extension (`extra_body={"callai": {...}}`).
    callai: Option<Extension>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnthropicMessage {
    role: String,
    #[serde(deserialize_with = "blocks")]
    content: TextOrParts,
}

/// A string, or content blocks (`null` is neither).
fn blocks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TextOrParts, D::Error> {
    text_or_parts(d, "Blocks")?.ok_or_else(|| {
        serde::de::Error::custom("data did not match any variant of untagged enum Blocks")
    })
}

/// `system`: a string, content blocks, or `null` (none).
fn optional_blocks<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<TextOrParts>, D::Error> {
    text_or_parts(d, "Blocks")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputConfig {
    format: Option<OutputFormat>,
    #[serde(rename = "effort")]
    _effort: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputFormat {
    #[serde(rename = "type")]
    kind: String,
    schema: Value,
}

/// The Anthropic Messages API.
pub struct Anthropic;

impl DropinApi for Anthropic {
    const API: Api = Api::Anthropic;
    const ID_PREFIX: &'static str = "msg_";
    type Request = MessagesRequest;
    type Framer = MessageFramer;
    type Echo = ();

    fn map(r: MessagesRequest) -> Result<(Mapped, ()), ApiError> {
        let present = [
            ("container", r.container.is_some()),
            ("mcp_servers", r.mcp_servers.is_some()),
        ];
        if let Some((param, _)) = present.iter().find(|(_, p)| *p) {
            return Err(ApiError::invalid(
                param,
                "this host does not offer it: a callAI call is text, a JSON schema or tool calls",
            ));
        }
        let mut breakpoints = cache::Breakpoints::default();
        if let Some(system) = &r.system {
            breakpoints.system(system)?;
        }
        let system_prompt = r
            .system
            .map(|system| text_of("system", "block", system))
            .transpose()?;
        let mut messages = Vec::with_capacity(r.messages.len());
        let mut history = Vec::new();
        for (i, m) in r.messages.into_iter().enumerate() {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(ApiError::invalid(
                        &format!("messages[{i}].role"),
                        format!("{other:?}: the Messages API takes user and assistant messages"),
                    ));
                }
            };
            tools::turn(
                i,
                role,
                m.content,
                &mut messages,
                &mut breakpoints,
                &mut history,
            )?;
        }
        let format = r.output_config.and_then(|c| c.format).or(r.output_format);
        let response_schema = match format {
            Some(format) if format.kind != "json_schema" => {
                return Err(ApiError::invalid(
                    "output_config.format.type",
                    format!("{:?}: this host takes json_schema", format.kind),
                ));
            }
            Some(format) => Some(format.schema),
            None => None,
        };
        let (tool_choice, parallel_tool_calls) = match r.tool_choice.map(tools::choice) {
            Some(choice) => {
                let (choice, parallel) = choice?;
                (Some(choice), parallel)
            }
            None => (None, None),
        };
        let thinking = thinking::checked(
            r.thinking,
            history,
            r.max_tokens,
            response_schema.is_some(),
            tool_choice.as_ref(),
        )?;
        let request = CallRequest {
            system_prompt,
            messages,
            max_tokens: Some(r.max_tokens),
            temperature: r.temperature,
            stop_sequences: r.stop_sequences,
            response_schema,
            tools: r
                .tools
                .map(|t| tools::tools(t, &mut breakpoints))
                .transpose()?,
            tool_choice,
            parallel_tool_calls,
            prompt_cache: breakpoints.into_cache().map(std::sync::Arc::new),
            thinking: thinking.map(std::sync::Arc::new),
            ..CallRequest::default()
        };
        let streaming = match r.stream {
            Some(true) => Streaming::On {
                include_usage: true,
            },
            _ => Streaming::Off,
        };
        let mapped = Mapped {
            request,
            extension: r.callai.unwrap_or_default(),
            streaming,
            model: r.model,
        };
        Ok((mapped, ()))
    }

    fn answer<'a>(
        model: &'a str,
        id: &'a str,
        result: &'a CallResult,
        callai: AnswerExtension,
        (): &'a (),
    ) -> impl Serialize + 'a {
        MessageAnswer {
            callai,
            content: content(result),
            id: id.to_owned(),
            model,
            role: "assistant",
            stop_reason: stop_reason(result.finish_reason),
            stop_sequence: None,
            kind: "message",
            usage: usage(result),
        }
    }

    fn framer(
        model: String,
        id: String,
        _: Streaming,
        settled: Option<&CallResult>,
        (): (),
    ) -> MessageFramer {
        // A live stream's usage is not known at its start.
        let start_usage = match settled {
            Some(result) => Usage {
                output_tokens: Some(0),
                ..usage(result)
            },
            None => Usage {
                input_tokens: Some(0),
                output_tokens: Some(0),
            },
        };
        MessageFramer {
            id,
            model,
            start_usage,
            text_closed: false,
            thinking: settled.map(|r| r.thinking.clone()).unwrap_or_default(),
        }
    }
}

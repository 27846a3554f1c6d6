//! `POST /v1/chat/completions`: the OpenAI Chat Completions API, mapped onto
//! a ctx.callAI request. What changes what the answer means and the host
//! cannot honour (tools, several choices, audio, log probabilities) is
//! refused naming its `param`; what does not (`n: 1`, `user`, `metadata`,
//! `seed`, `top_p`, the penalties) is dropped.

use super::api::{
    AnswerExtension, Api, DropinApi, Extension, Framer, Mapped, Streaming, TextOrParts, answer_id,
    answer_text, openai_finish, text_of, text_or_parts, unix_now,
};
use super::sse::Frame;
use crate::error::ApiError;
use crate::tenants::Caller;
use axum::response::IntoResponse;
use callai_engine::wire::{CallRequest, CallResult, Message, Role};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::borrow::Cow;

/// A Chat Completions request, as far as this host reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    model: String,
    messages: Vec<ChatMessage>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f64>,
    stop: Option<Stop>,
    response_format: Option<ResponseFormat>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    n: Option<u32>,
    logprobs: Option<bool>,
    modalities: Option<Vec<String>>,
    // Refused when present: the host cannot honour them.
    tools: Option<Value>,
    tool_choice: Option<Value>,
    functions: Option<Value>,
    function_call: Option<Value>,
    audio: Option<Value>,
    top_logprobs: Option<Value>,
    logit_bias: Option<Value>,
    prediction: Option<Value>,
    web_search_options: Option<Value>,
    // Dropped: they do not change what the answer means.
    #[serde(rename = "user")]
    _user: Option<IgnoredAny>,
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(rename = "seed")]
    _seed: Option<IgnoredAny>,
    #[serde(rename = "top_p")]
    _top_p: Option<IgnoredAny>,
    #[serde(rename = "frequency_penalty")]
    _frequency_penalty: Option<IgnoredAny>,
    #[serde(rename = "presence_penalty")]
    _presence_penalty: Option<IgnoredAny>,
    #[serde(rename = "store")]
    _store: Option<IgnoredAny>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    #[serde(rename = "parallel_tool_calls")]
    _parallel_tool_calls: Option<IgnoredAny>,
    #[serde(rename = "prompt_cache_key")]
    _prompt_cache_key: Option<IgnoredAny>,
    #[serde(rename = "safety_identifier")]
    _safety_identifier: Option<IgnoredAny>,
    #[serde(rename = "reasoning_effort")]
    _reasoning_effort: Option<IgnoredAny>,
    #[serde(rename = "verbosity")]
    _verbosity: Option<IgnoredAny>,
    /// The RFC 0248 extension (`extra_body={"callai": {...}}`).
    callai: Option<Extension>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatMessage {
    role: String,
    #[serde(default, deserialize_with = "content")]
    content: Option<TextOrParts>,
    #[serde(rename = "name")]
    _name: Option<IgnoredAny>,
    #[serde(rename = "refusal")]
    _refusal: Option<IgnoredAny>,
    tool_calls: Option<Value>,
    tool_call_id: Option<Value>,
    function_call: Option<Value>,
}

/// A message's content: a string, or content parts (`null`: none).
fn content<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TextOrParts>, D::Error> {
    text_or_parts(d, "Content")
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSchemaFormat {
    #[serde(rename = "name")]
    _name: Option<String>,
    #[serde(rename = "description")]
    _description: Option<String>,
    schema: Option<Value>,
    #[serde(rename = "strict")]
    _strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamOptions {
    include_usage: Option<bool>,
    #[serde(rename = "include_obfuscation")]
    _include_obfuscation: Option<IgnoredAny>,
}

/// Refuses what the host cannot honour, naming it.
fn refuse_unhonoured(r: &ChatRequest) -> Result<(), ApiError> {
    let no = |param: &str, why: &str| Err(ApiError::invalid(param, why));
    let present = [
        ("tools", r.tools.is_some()),
        ("tool_choice", r.tool_choice.is_some()),
        ("functions", r.functions.is_some()),
        ("function_call", r.function_call.is_some()),
        ("audio", r.audio.is_some()),
        ("top_logprobs", r.top_logprobs.is_some()),
        ("logit_bias", r.logit_bias.is_some()),
        ("prediction", r.prediction.is_some()),
        ("web_search_options", r.web_search_options.is_some()),
    ];
    if let Some((param, _)) = present.iter().find(|(_, p)| *p) {
        return no(
            param,
            "this host does not offer it: a callAI call is text or a JSON schema",
        );
    }
    if r.n.is_some_and(|n| n != 1) {
        return no("n", "this host answers one choice per call");
    }
    if r.logprobs == Some(true) {
        return no("logprobs", "this host does not return log probabilities");
    }
    if r.modalities
        .as_ref()
        .is_some_and(|m| m.iter().any(|x| x != "text"))
    {
        return no("modalities", "this host answers text only");
    }
    Ok(())
}

/// The OpenAI Chat Completions API.
pub struct OpenAi;

impl DropinApi for OpenAi {
    const API: Api = Api::OpenAi;
    type Request = ChatRequest;
    type Framer = ChatFramer;

    fn map(r: ChatRequest) -> Result<Mapped, ApiError> {
        refuse_unhonoured(&r)?;
        let mut system = Vec::new();
        let mut messages = Vec::with_capacity(r.messages.len());
        for (i, m) in r.messages.into_iter().enumerate() {
            if m.tool_calls.is_some() || m.tool_call_id.is_some() || m.function_call.is_some() {
                return Err(ApiError::invalid(
                    &format!("messages[{i}]"),
                    "tool calls and their results: this host does not call tools",
                ));
            }
            let text = match m.content {
                None => String::new(),
                Some(content) => text_of(&format!("messages[{i}].content"), "part", content)?,
            };
            let role = match m.role.as_str() {
                "system" | "developer" if messages.is_empty() => {
                    system.push(text);
                    continue;
                }
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(ApiError::invalid(
                        &format!("messages[{i}].role"),
                        format!(
                            "{other:?}: this host takes system, developer, user and assistant messages"
                        ),
                    ));
                }
            };
            messages.push(Message::new(role, text));
        }
        let response_schema = match r.response_format {
            Some(ResponseFormat::JsonObject) => Some(json!({"type": "object"})),
            Some(ResponseFormat::JsonSchema { json_schema }) => {
                Some(json_schema.schema.unwrap_or_else(|| json!({})))
            }
            Some(ResponseFormat::Text) | None => None,
        };
        let request = CallRequest {
            system_prompt: (!system.is_empty()).then(|| system.join("\n\n")),
            messages,
            max_tokens: r.max_completion_tokens.or(r.max_tokens),
            temperature: r.temperature,
            stop_sequences: r.stop.map(|stop| match stop {
                Stop::One(s) => vec![s],
                Stop::Many(s) => s,
            }),
            response_schema,
            ..CallRequest::default()
        };
        let streaming = match r.stream {
            Some(true) => Streaming::On {
                include_usage: r
                    .stream_options
                    .as_ref()
                    .and_then(|o| o.include_usage)
                    .unwrap_or(false),
            },
            _ => Streaming::Off,
        };
        Ok(Mapped {
            request,
            extension: r.callai.unwrap_or_default(),
            streaming,
            model: r.model,
        })
    }

    fn answer<'a>(model: &'a str, result: &'a CallResult) -> impl Serialize + 'a {
        ChatCompletion {
            callai: AnswerExtension::of(result),
            choices: [Choice {
                finish_reason: openai_finish(result.finish_reason),
                index: 0,
                logprobs: None,
                message: AssistantMessage {
                    content: answer_text(result),
                    refusal: None,
                    role: "assistant",
                },
            }],
            created: unix_now(),
            id: answer_id("chatcmpl-"),
            model,
            object: "chat.completion",
            usage: usage(result),
        }
    }

    fn framer(model: String, streaming: Streaming, _: Option<&CallResult>) -> ChatFramer {
        ChatFramer {
            id: answer_id("chatcmpl-"),
            created: unix_now(),
            model,
            include_usage: matches!(
                streaming,
                Streaming::On {
                    include_usage: true
                }
            ),
        }
    }
}

/// `usage` in OpenAI's words: the final attempt's, each count that it
/// reported (a total only when both were), as the Anthropic shape keeps
/// what it has; `null` when it reported none.
#[derive(Debug, Serialize)]
struct ChatUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<u32>,
}

fn usage(result: &CallResult) -> Option<ChatUsage> {
    let u = result.usage.as_ref()?;
    let (prompt, completion) = (u.input_tokens, u.output_tokens);
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    Some(ChatUsage {
        completion_tokens: completion,
        prompt_tokens: prompt,
        total_tokens: prompt.zip(completion).map(|(p, c)| p.saturating_add(c)),
    })
}

// The answers' keys are in byte order, as they were when the answers were
// built as JSON trees.

/// A `chat.completion`.
#[derive(Serialize)]
struct ChatCompletion<'a> {
    callai: AnswerExtension,
    choices: [Choice<'a>; 1],
    created: u64,
    id: String,
    model: &'a str,
    object: &'static str,
    usage: Option<ChatUsage>,
}

#[derive(Serialize)]
struct Choice<'a> {
    finish_reason: &'static str,
    index: u32,
    logprobs: Option<()>,
    message: AssistantMessage<'a>,
}

#[derive(Serialize)]
struct AssistantMessage<'a> {
    content: Cow<'a, str>,
    refusal: Option<()>,
    role: &'static str,
}

/// A `chat.completion.chunk`.
#[derive(Serialize)]
struct Chunk<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    callai: Option<AnswerExtension>,
    choices: &'a [ChunkChoice<'a>],
    created: u64,
    id: &'a str,
    model: &'a str,
    object: &'static str,
    /// In the last chunk of a stream that asked for it (`null` when the
    /// provider reported none).
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<ChatUsage>>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    delta: Delta<'a>,
    finish_reason: Option<&'static str>,
    index: u32,
}

#[derive(Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
}

/// The chunks of a streamed call.
pub struct ChatFramer {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
}

impl ChatFramer {
    fn chunk<'a>(&'a self, choices: &'a [ChunkChoice<'a>]) -> Chunk<'a> {
        Chunk {
            callai: None,
            choices,
            created: self.created,
            id: &self.id,
            model: &self.model,
            object: "chat.completion.chunk",
            usage: None,
        }
    }
}

/// One choice's delta, as a frame.
fn frame(chunk: &Chunk<'_>) -> Frame {
    (
        None,
        serde_json::to_string(chunk).expect("a chunk always serialises"),
    )
}

impl Framer for ChatFramer {
    fn start(&mut self) -> Vec<Frame> {
        let delta = Delta {
            content: Some(""),
            role: Some("assistant"),
        };
        let choices = [ChunkChoice {
            delta,
            finish_reason: None,
            index: 0,
        }];
        vec![frame(&self.chunk(&choices))]
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        let delta = Delta {
            content: Some(text),
            role: None,
        };
        let choices = [ChunkChoice {
            delta,
            finish_reason: None,
            index: 0,
        }];
        vec![frame(&self.chunk(&choices))]
    }

    fn end(&mut self, result: &CallResult) -> Vec<Frame> {
        let choices = [ChunkChoice {
            delta: Delta {
                content: None,
                role: None,
            },
            finish_reason: Some(openai_finish(result.finish_reason)),
            index: 0,
        }];
        let mut finish = self.chunk(&choices);
        let mut frames = Vec::with_capacity(3);
        if self.include_usage {
            frames.push(frame(&finish));
            finish = self.chunk(&[]);
            finish.usage = Some(usage(result));
        }
        finish.callai = Some(AnswerExtension::of(result));
        frames.push(frame(&finish));
        frames.push((None, "[DONE]".to_owned()));
        frames
    }

    fn error(&mut self, error: &ApiError) -> Vec<Frame> {
        // The SDKs raise an API error on a chunk carrying `error`.
        let body = super::error::body(Api::OpenAi, error);
        vec![(None, String::from_utf8(body).expect("JSON is UTF-8"))]
    }
}

/// `GET /v1/models`: `{"object": "list", "data": [...]}`.
#[derive(Serialize)]
struct ModelList<'a> {
    data: Vec<Model<'a>>,
    object: &'static str,
}

#[derive(Serialize)]
struct Model<'a> {
    created: u64,
    id: String,
    object: &'static str,
    owned_by: &'a str,
}

/// `GET /v1/models`: every `PROVIDER/MODEL` this host routes for the caller
/// (each provider's configured model; a request may name any other model of
/// it); a tenant's list keeps to its `allowedProviders`.
pub async fn models(axum::Extension(caller): axum::Extension<Caller>) -> impl IntoResponse {
    let created = unix_now();
    // The caller's host: a tenant sees only the providers it may reach.
    let host = &caller.0.host;
    let data = host
        .allowed_providers()
        .into_iter()
        .filter_map(|name| {
            let (_, provider) = host.providers().get(name)?;
            Some(Model {
                created,
                id: format!("{name}/{}", provider.default_model()),
                object: "model",
                owned_by: name,
            })
        })
        .collect();
    axum::Json(ModelList {
        data,
        object: "list",
    })
    .into_response()
}

//! `POST /v1/chat/completions`: the OpenAI Chat Completions API, mapped onto
//! a ctx.callAI request, function tools included. What changes what the
//! answer means and the host cannot honour (several choices, audio, log
//! probabilities, the legacy `functions`) is refused naming its `param`;
//! what does not (`n: 1`, `user`, `metadata`, `seed`, `top_p`, the
//! penalties) is dropped.

mod answer;
mod format;
mod tools;

pub use answer::{ChatFramer, models};

use super::api::{
    AnswerExtension, Api, DropinApi, Extension, Mapped, Streaming, answer_text, openai_finish,
    unix_now,
};
use super::parts::{TextOrParts, text_of, text_or_parts};
use crate::error::ApiError;
use answer::{AssistantMessage, ChatCompletion, Choice, usage};
use callai_engine::wire::{CallRequest, CallResult, Message, Role, TokenLimitField};
use format::ResponseFormat;
use serde::Deserialize;
use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tools::{ChatTool, ChatToolCall, ChatToolChoice};

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
    tools: Option<Vec<ChatTool>>,
    tool_choice: Option<ChatToolChoice>,
    parallel_tool_calls: Option<bool>,
    // Refused when present: the host cannot honour them.
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
    #[serde(rename = "prompt_cache_key")]
    _prompt_cache_key: Option<IgnoredAny>,
    #[serde(rename = "safety_identifier")]
    _safety_identifier: Option<IgnoredAny>,
    reasoning_effort: Option<String>,
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
    tool_calls: Option<Vec<ChatToolCall>>,
    tool_call_id: Option<String>,
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
#[serde(deny_unknown_fields)]
struct StreamOptions {
    include_usage: Option<bool>,
    #[serde(rename = "include_obfuscation")]
    _include_obfuscation: Option<IgnoredAny>,
}

/// The leading system and developer messages' texts, and the rest of the
/// conversation in the engine's terms; what it cannot take refused naming
/// the message's field.
fn conversation(input: Vec<ChatMessage>) -> Result<(Vec<String>, Vec<Message>), ApiError> {
    let mut system = Vec::new();
    let mut messages = Vec::with_capacity(input.len());
    for (i, m) in input.into_iter().enumerate() {
        if m.function_call.is_some() {
            return Err(ApiError::invalid(
                &format!("messages[{i}].function_call"),
                "the legacy function call: send `tool_calls` instead",
            ));
        }
        let (text, images) = match m.content {
            None => (String::new(), Vec::new()),
            Some(TextOrParts::Text(text)) => (text, Vec::new()),
            Some(parts) => {
                let param = format!("messages[{i}].content");
                // A user's message may carry images.
                if m.role == "user" {
                    super::images::user_content(&param, parts)?
                } else {
                    (text_of(&param, "part", parts)?, Vec::new())
                }
            }
        };
        let role = match m.role.as_str() {
            "system" | "developer" if messages.is_empty() => {
                system.push(text);
                continue;
            }
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => {
                let Some(id) = m.tool_call_id else {
                    return Err(ApiError::invalid(
                        &format!("messages[{i}].tool_call_id"),
                        "is required on a tool message",
                    ));
                };
                messages.push(Message::tool_result(id, text));
                continue;
            }
            other => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].role"),
                    format!(
                        "{other:?}: this host takes system, developer, user, assistant and tool messages"
                    ),
                ));
            }
        };
        match m.tool_calls {
            Some(calls) if role == Role::Assistant && !calls.is_empty() => {
                messages.push(Message::tool_calls(text, tools::calls(calls)));
            }
            Some(calls) if !calls.is_empty() => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].tool_calls"),
                    "only an assistant's message calls tools",
                ));
            }
            _ => messages.push(Message {
                images,
                ..Message::new(role, text)
            }),
        }
    }
    Ok((system, messages))
}

/// Refuses what the host cannot honour, naming it.
fn refuse_unhonoured(r: &ChatRequest) -> Result<(), ApiError> {
    let no = |param: &str, why: &str| Err(ApiError::invalid(param, why));
    if r.functions.is_some() || r.function_call.is_some() {
        let param = if r.functions.is_some() {
            "functions"
        } else {
            "function_call"
        };
        return no(
            param,
            "the legacy function-calling fields: send `tools` and `tool_choice` instead",
        );
    }
    let present = [
        ("audio", r.audio.is_some()),
        ("top_logprobs", r.top_logprobs.is_some()),
        ("logit_bias", r.logit_bias.is_some()),
        ("prediction", r.prediction.is_some()),
        ("web_search_options", r.web_search_options.is_some()),
    ];
    if let Some((param, _)) = present.iter().find(|(_, p)| *p) {
        return no(
            param,
            "this host does not offer it: a callAI call is text, a JSON schema or tool calls",
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
    const ID_PREFIX: &'static str = "chatcmpl-";
    type Request = ChatRequest;
    type Framer = ChatFramer;
    type Echo = ();

    fn map(r: ChatRequest) -> Result<(Mapped, ()), ApiError> {
        refuse_unhonoured(&r)?;
        let (system, messages) = conversation(r.messages)?;
        let response_schema = r.response_format.and_then(ResponseFormat::schema);
        let request = CallRequest {
            system_prompt: (!system.is_empty()).then(|| system.join("\n\n")),
            messages,
            max_tokens: r.max_completion_tokens.or(r.max_tokens),
            token_limit_field: match (r.max_completion_tokens, r.max_tokens) {
                (Some(_), _) => Some(TokenLimitField::MaxCompletionTokens),
                (None, Some(_)) => Some(TokenLimitField::MaxTokens),
                (None, None) => None,
            },
            temperature: r.temperature,
            stop_sequences: r.stop.map(|stop| match stop {
                Stop::One(s) => vec![s],
                Stop::Many(s) => s,
            }),
            response_schema,
            tools: r.tools.map(tools::tools).transpose()?,
            tool_choice: r.tool_choice.map(tools::choice).transpose()?,
            parallel_tool_calls: r.parallel_tool_calls,
            // `none` asks for no reasoning, which every model gives.
            reasoning_effort: r.reasoning_effort.filter(|e| e != "none"),
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
        ChatCompletion {
            callai,
            choices: [Choice {
                finish_reason: openai_finish(result.finish_reason),
                index: 0,
                logprobs: None,
                message: AssistantMessage {
                    content: match (&result.tool_calls, &result.content) {
                        (Some(_), None) => None,
                        _ => Some(answer_text(result)),
                    },
                    refusal: None,
                    role: "assistant",
                    tool_calls: result
                        .tool_calls
                        .as_deref()
                        .map(|calls| tools::out_calls(calls, false)),
                },
            }],
            created: unix_now(),
            id: id.to_owned(),
            model,
            object: "chat.completion",
            usage: usage(result),
        }
    }

    fn framer(
        model: String,
        id: String,
        streaming: Streaming,
        _: Option<&CallResult>,
        (): (),
    ) -> ChatFramer {
        ChatFramer {
            id,
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

//! `POST /v1/chat/completions`: the OpenAI Chat Completions API, mapped onto
//! a ctx.callAI request. What changes what the answer means and the host
//! cannot honour (tools, several choices, audio, log probabilities) is
//! refused naming its `param`; what does not (`n: 1`, `user`, `metadata`,
//! `seed`, `top_p`, the penalties) is dropped.

use super::{
    AnswerExtension, Api, DropinError, Extension, Mapped, Streaming, answer_id, answer_model,
    answer_text, attempts_headers, openai_finish, sse, unix_now,
};
use crate::app::AppState;
use crate::tenants::Caller;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use callai_engine::wire::CallResult;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;

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
    content: Option<Content>,
    #[serde(rename = "name")]
    _name: Option<IgnoredAny>,
    #[serde(rename = "refusal")]
    _refusal: Option<IgnoredAny>,
    tool_calls: Option<Value>,
    tool_call_id: Option<Value>,
    function_call: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Map<String, Value>>),
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
fn refuse_unhonoured(r: &ChatRequest) -> Result<(), DropinError> {
    let no = |param: &str, why: &str| Err(DropinError::invalid(Api::OpenAi, param, why));
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

/// A message's text: a string, or text parts joined.
fn text_of(i: usize, content: Option<&Content>) -> Result<String, DropinError> {
    match content {
        None => Ok(String::new()),
        Some(Content::Text(t)) => Ok(t.clone()),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(t))) => text.push_str(t),
                    (kind, _) => {
                        return Err(DropinError::invalid(
                            Api::OpenAi,
                            format!("messages[{i}].content[{j}]"),
                            format!(
                                "a part of type {:?}: this host takes text parts only",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
    }
}

/// The request as a ctx.callAI request.
pub fn map(r: ChatRequest) -> Result<Mapped, DropinError> {
    refuse_unhonoured(&r)?;
    let mut wire = Map::new();
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for (i, m) in r.messages.iter().enumerate() {
        if m.tool_calls.is_some() || m.tool_call_id.is_some() || m.function_call.is_some() {
            return Err(DropinError::invalid(
                Api::OpenAi,
                format!("messages[{i}]"),
                "tool calls and their results: this host does not call tools",
            ));
        }
        let text = text_of(i, m.content.as_ref())?;
        let role = match m.role.as_str() {
            "system" | "developer" if messages.is_empty() => {
                system.push(text);
                continue;
            }
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return Err(DropinError::invalid(
                    Api::OpenAi,
                    format!("messages[{i}].role"),
                    format!(
                        "{other:?}: this host takes system, developer, user and assistant messages"
                    ),
                ));
            }
        };
        messages.push(json!({"role": role, "content": text}));
    }
    if !system.is_empty() {
        wire.insert("systemPrompt".into(), system.join("\n\n").into());
    }
    wire.insert("messages".into(), Value::Array(messages));
    if let Some(n) = r.max_completion_tokens.or(r.max_tokens) {
        wire.insert("maxTokens".into(), n.into());
    }
    if let Some(t) = r.temperature {
        wire.insert("temperature".into(), json!(t));
    }
    match r.stop {
        Some(Stop::One(s)) => {
            wire.insert("stopSequences".into(), json!([s]));
        }
        Some(Stop::Many(s)) => {
            wire.insert("stopSequences".into(), json!(s));
        }
        None => {}
    }
    match r.response_format {
        Some(ResponseFormat::JsonObject) => {
            wire.insert("responseSchema".into(), json!({"type": "object"}));
        }
        Some(ResponseFormat::JsonSchema { json_schema }) => {
            let schema = json_schema.schema.unwrap_or_else(|| json!({}));
            wire.insert("responseSchema".into(), schema);
        }
        Some(ResponseFormat::Text) | None => {}
    }
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
        wire,
        extension: r.callai.unwrap_or_default(),
        streaming,
        model: r.model,
    })
}

/// `usage` in OpenAI's words: the final attempt's, each count that it
/// reported (a total only when both were), as the Anthropic shape keeps
/// what it has; `null` when it reported none.
#[derive(Debug, Serialize)]
struct ChatUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens: Option<u32>,
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
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt.zip(completion).map(|(p, c)| p.saturating_add(c)),
    })
}

/// `POST /v1/chat/completions`.
pub async fn chat(
    State(state): State<Arc<AppState>>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, DropinError> {
    let api = Api::OpenAi;
    let request: ChatRequest = super::read_body(api, body)?;
    let mut mapped = map(request)?;
    let framer = |model: String, include_usage| ChatFramer {
        base: json!({"id": answer_id("chatcmpl-"), "object": "chat.completion.chunk",
                     "created": unix_now(), "model": model}),
        include_usage,
    };
    if let Streaming::On { include_usage } = mapped.streaming
        && !mapped.wire.contains_key("responseSchema")
    {
        // A text call streams as its provider does.
        let call = super::prepare(&state, &caller, api, &headers, &mut mapped)?;
        let model = answer_model(&state, &mapped.wire, &CallResult::default());
        let framer = framer(model, include_usage);
        return super::streaming::relay(state.clone(), caller, api, call, framer).await;
    }
    let (result, budget) = super::settle(&state, &caller, api, &headers, &mut mapped).await?;
    let model = answer_model(&state, &mapped.wire, &result);
    let mut headers = attempts_headers(&result);
    headers.extend(budget);
    if let Streaming::On { include_usage } = mapped.streaming {
        let frames = super::streaming::settled(framer(model, include_usage), &result);
        return Ok((headers, sse::body(frames)).into_response());
    }
    let extension = AnswerExtension {
        attempts: result.attempts,
    };
    let answer = json!({
        "id": answer_id("chatcmpl-"),
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer_text(&result), "refusal": null},
            "finish_reason": openai_finish(result.finish_reason),
            "logprobs": null,
        }],
        "usage": usage(&result),
        "callai": extension,
    });
    Ok((headers, axum::Json(answer)).into_response())
}

/// The chunks of a streamed text call.
struct ChatFramer {
    base: Value,
    include_usage: bool,
}

impl ChatFramer {
    fn chunk(&self, choices: Value) -> Value {
        let mut c = self.base.clone();
        c["choices"] = choices;
        c
    }
}

impl super::streaming::Framer for ChatFramer {
    fn start(&mut self) -> Vec<sse::Frame> {
        let c = self.chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]));
        vec![(None, c.to_string())]
    }

    fn text(&mut self, text: &str) -> Vec<sse::Frame> {
        let c =
            self.chunk(json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]));
        vec![(None, c.to_string())]
    }

    fn end(&mut self, result: &CallResult) -> Vec<sse::Frame> {
        let extension = json!(AnswerExtension {
            attempts: result.attempts,
        });
        let mut finish = self.chunk(json!([{"index": 0, "delta": {}, "finish_reason": openai_finish(result.finish_reason)}]));
        let mut frames = Vec::new();
        if self.include_usage {
            frames.push((None, finish.to_string()));
            finish = self.chunk(json!([]));
            finish["usage"] = json!(usage(result));
        }
        finish["callai"] = extension;
        frames.push((None, finish.to_string()));
        frames.push((None, "[DONE]".to_owned()));
        frames
    }

    fn error(&mut self, error: &DropinError) -> Vec<sse::Frame> {
        // The SDKs raise an API error on a chunk carrying `error`.
        vec![(None, error.body().to_string())]
    }
}

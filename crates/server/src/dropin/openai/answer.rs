//! The Chat Completions API's answers: a `chat.completion`, the chunks of
//! a streamed one (text as it comes, tool calls once judged), and the
//! model list.

use super::tools::out_calls;
use crate::dropin::api::{AnswerExtension, Api, Framer, openai_finish, unix_now};
use crate::dropin::sse::Frame;
use crate::error::ApiError;
use axum::response::IntoResponse;
use callai_engine::wire::{CallResult, ToolCall};
use callai_gateway::tenants::Caller;
use serde::Serialize;
use std::borrow::Cow;

/// `usage` in OpenAI's words: the final attempt's, each count that it
/// reported (a total only when both were), as the Anthropic shape keeps
/// what it has; `null` when it reported none.
#[derive(Debug, Serialize)]
pub(super) struct ChatUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<u32>,
}

pub(super) fn usage(result: &CallResult) -> Option<ChatUsage> {
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
pub(super) struct ChatCompletion<'a> {
    pub callai: AnswerExtension,
    pub choices: [Choice<'a>; 1],
    pub created: u64,
    pub id: String,
    pub model: &'a str,
    pub object: &'static str,
    pub usage: Option<ChatUsage>,
}

#[derive(Serialize)]
pub(super) struct Choice<'a> {
    pub finish_reason: &'static str,
    pub index: u32,
    pub logprobs: Option<()>,
    pub message: AssistantMessage<'a>,
}

#[derive(Serialize)]
pub(super) struct AssistantMessage<'a> {
    /// `null` when the answer only calls tools.
    pub content: Option<Cow<'a, str>>,
    pub refusal: Option<()>,
    pub role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<super::tools::OutCall<'a>>>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<super::tools::OutCall<'a>>>,
}

/// The chunks of a streamed call.
pub struct ChatFramer {
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) include_usage: bool,
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

impl ChatFramer {
    /// The frame of a chunk whose one choice carries `delta`, unfinished.
    fn delta(&self, delta: Delta<'_>) -> Vec<Frame> {
        let choices = [ChunkChoice {
            delta,
            finish_reason: None,
            index: 0,
        }];
        vec![frame(&self.chunk(&choices))]
    }
}

impl Framer for ChatFramer {
    fn start(&mut self) -> Vec<Frame> {
        self.delta(Delta {
            content: Some(""),
            role: Some("assistant"),
            tool_calls: None,
        })
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        self.delta(Delta {
            content: Some(text),
            role: None,
            tool_calls: None,
        })
    }

    fn tool_calls(&mut self, calls: &[ToolCall]) -> Vec<Frame> {
        // Each call whole in one delta: its id, name and arguments.
        self.delta(Delta {
            content: None,
            role: None,
            tool_calls: Some(out_calls(calls, true)),
        })
    }

    fn end(&mut self, result: &CallResult) -> Vec<Frame> {
        let choices = [ChunkChoice {
            delta: Delta {
                content: None,
                role: None,
                tool_calls: None,
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
        let body = crate::dropin::error::body(Api::OpenAi, error);
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
    /// What a routed name is a model of (`chat` or `embedding`).
    #[serde(skip_serializing_if = "Option::is_none")]
    callai: Option<ModelExtension>,
    created: u64,
    id: String,
    object: &'static str,
    owned_by: &'a str,
}

#[derive(Serialize)]
struct ModelExtension {
    kind: &'static str,
}

/// `GET /v1/models`: the model names `[models]` routes (a family as its
/// pattern, `gpt-4o*`; each with `callai.kind`, `chat` or `embedding`), then the bare name of `[defaults] provider`'s
/// model when bare names go to it (any other bare name does too), then
/// every `PROVIDER/MODEL` this host serves the caller (each provider's
/// configured model; a request may name any other model of it); a
/// tenant's list keeps to its `allowedProviders` (a route is listed when
/// one of its targets is allowed).
pub async fn models(axum::Extension(caller): axum::Extension<Caller>) -> impl IntoResponse {
    let created = unix_now();
    // The caller's host: a tenant sees only what it may reach.
    let host = &caller.0.host;
    let routed = host.routed_models().into_iter().map(|(name, kind)| Model {
        callai: Some(ModelExtension {
            kind: kind.as_str(),
        }),
        created,
        id: name.to_owned(),
        object: "model",
        owned_by: "callai",
    });
    let providers = host.allowed_providers().into_iter().filter_map(|name| {
        let (_, provider) = host.providers().get(name)?;
        Some(Model {
            callai: None,
            created,
            id: format!("{name}/{}", provider.default_model()),
            object: "model",
            owned_by: name,
        })
    });
    let default = &host.config().defaults.provider;
    let bare = (default != "mock" && host.config().provider_allowed(default))
        .then(|| host.providers().get(default))
        .flatten()
        .map(|(name, provider)| Model {
            callai: None,
            created,
            id: provider.default_model().to_owned(),
            object: "model",
            owned_by: name,
        });
    let mut data: Vec<Model<'_>> = routed.collect();
    data.extend(bare.filter(|m| !data.iter().any(|d| d.id == m.id)));
    data.extend(providers);
    axum::Json(ModelList {
        data,
        object: "list",
    })
    .into_response()
}

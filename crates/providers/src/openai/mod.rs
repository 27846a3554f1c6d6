//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp
//! server, LM Studio). Native structured output is
//! `response_format: {type: "json_schema"}`.

mod answer;
mod responses;
mod responses_answer;

pub(crate) use responses::ResponsesWire;

use super::adapter::{Delivery, WireFormat};
use super::http::ApiKey;
use super::upstream::{KeyHeader, Upstream};
use answer::{Chunk, Completion, Folded};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{Role, StructuredOutput, ToolChoice};
use serde::Serialize;
use serde_json::{Map, Value};

/// The OpenAI chat-completions wire format.
#[derive(Debug)]
pub struct OpenAiWire;

/// A chat-completions request body, borrowing from the request.
#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<ChatMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// Instead of `max_tokens`, for the models that take only it.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<FunctionTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    /// A reasoning model's effort, when the call set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    /// The config's `extraBody`.
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    /// `null` for an assistant's turn that only calls tools.
    content: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<FunctionCall<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A message's content: a string, or parts when it carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

impl<'a> Content<'a> {
    /// The text of `m`, followed by its images as `image_url` parts.
    fn of(m: &'a callai_wire::Message) -> Self {
        if m.images.is_empty() {
            return Self::Text(&m.content);
        }
        let text = (!m.content.is_empty()).then_some(Part::Text { text: &m.content });
        let images = m.images.iter().map(|image| Part::ImageUrl {
            image_url: ImageUrl {
                url: &image.url,
                detail: image.detail.as_deref(),
            },
        });
        Self::Parts(text.into_iter().chain(images).collect())
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl<'a> ChatMessage<'a> {
    fn text(role: &'static str, content: &'a str) -> Self {
        Self {
            role,
            content: Some(Content::Text(content)),
            tool_calls: None,
            tool_call_id: None,
        }
    }
}

/// `{"type": "function", "function": {...}}`, a tool offered.
#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

/// A tool call in an assistant's turn.
#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CalledFunction<'a>,
}

#[derive(Serialize)]
struct CalledFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// `tool_choice`: a word, or one function.
#[derive(Serialize)]
#[serde(untagged)]
enum Choice<'a> {
    Word(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: NamedFunction<'a>,
    },
}

#[derive(Serialize)]
struct NamedFunction<'a> {
    name: &'a str,
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
    type Embeddings = crate::embeddings::OpenAiEmbeddings;

    fn takes_reasoning(model: &str) -> bool {
        crate::upstream::reasoning_family(model)
    }
    const NATIVE_TERMS: &'static [&'static str] = &["response_format", "json_schema"];

    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        key.map(|k| key_header.header(k.expose()))
            .into_iter()
            .collect()
    }

    fn body(model: &str, r: &ProviderRequest, delivery: Delivery, upstream: &Upstream) -> Vec<u8> {
        let role = |role: Role| match role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        };
        let system = r
            .system_prompt
            .as_deref()
            .map(|content| ChatMessage::text("system", content));
        let messages = system
            .into_iter()
            .chain(r.messages.iter().map(|m| {
                let calls = (!m.tool_calls.is_empty()).then(|| {
                    m.tool_calls
                        .iter()
                        .map(|c| FunctionCall {
                            id: &c.id,
                            kind: "function",
                            function: CalledFunction {
                                name: &c.name,
                                arguments: &c.arguments,
                            },
                        })
                        .collect()
                });
                ChatMessage {
                    role: role(m.role),
                    content: (calls.is_none() || !m.content.is_empty()).then(|| Content::of(m)),
                    tool_calls: calls,
                    tool_call_id: m.tool_call_id.as_deref(),
                }
            }))
            .collect();
        let tools = r.tools.as_ref().map(|t| {
            t.tools
                .iter()
                .map(|tool| FunctionTool {
                    kind: "function",
                    function: Function {
                        name: &tool.name,
                        description: tool.description.as_deref(),
                        parameters: &tool.parameters,
                        strict: tool.strict,
                    },
                })
                .collect()
        });
        let tool_choice = r.tools.as_ref().map(|t| match &t.choice {
            ToolChoice::Auto => Choice::Word("auto"),
            ToolChoice::None => Choice::Word("none"),
            ToolChoice::Required => Choice::Word("required"),
            ToolChoice::Tool(name) => Choice::Function {
                kind: "function",
                function: NamedFunction { name },
            },
        });
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
        let model = r.model.as_deref().unwrap_or(model);
        let completion = upstream
            .max_tokens_field
            .completion_tokens_for(model, r.token_limit_field);
        let body = ChatBody {
            model,
            messages,
            max_tokens: (!completion).then_some(r.max_tokens),
            max_completion_tokens: completion.then_some(r.max_tokens),
            temperature: r.temperature,
            stop: &r.stop_sequences,
            response_format,
            stream: streamed,
            stream_options: streamed.then_some(StreamOptions {
                include_usage: true,
            }),
            tools,
            tool_choice,
            parallel_tool_calls: r.tools.as_ref().and_then(|t| t.parallel),
            reasoning_effort: r.reasoning_effort.as_deref(),
            extra: &upstream.extra_body,
        };
        serde_json::to_vec(&body).expect("a chat body serializes")
    }

    type Answer = Completion;
    type Event = Chunk;

    fn event(kind: &str, data: &str) -> serde_json::Result<Self::Event> {
        crate::adapter::by_data(kind, data)
    }
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

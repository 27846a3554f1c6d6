//! An OpenAI-kind provider spoken to over the Responses API (`api =
//! "responses"` in its section: `POST /responses`), for models offered only
//! there. The request body is built from the engine's request as the chat
//! body is: the system prompt as `instructions`, the conversation as input
//! items (messages, `function_call`, `function_call_output`), native
//! structured output as `text.format`, function tools flat, `store: false`
//! (the host keeps what it keeps itself). The Responses API has no stop
//! sequences: a reply is cut at the first one it holds ([`settle`]).

use super::responses_answer::{Folded, ResponseAnswer, ResponseEvent};
use crate::adapter::{Delivery, WireFormat};
use crate::http::ApiKey;
use crate::upstream::{KeyHeader, Upstream};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{Role, StructuredOutput, ToolChoice};
use serde::Serialize;
use serde_json::{Map, Value};

/// A Responses API request body, borrowing from the request.
#[derive(Serialize)]
struct ResponsesBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Item<'a>>,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<TextConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<FunctionTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    /// `false` unless the config's `extraBody` says otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    /// The config's `extraBody`.
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// One input item.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Content<'a>,
    },
    Call {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    Output {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: &'a str,
        output: &'a str,
    },
}

/// A message's content: its text, or parts when it carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText {
        text: &'a str,
    },
    InputImage {
        image_url: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<&'a str>,
    },
}

#[derive(Serialize)]
struct TextConfig<'a> {
    format: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'static str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Choice<'a> {
    Word(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'a str,
    },
}

#[derive(Serialize)]
struct Reasoning<'a> {
    effort: &'a str,
}

/// The input items of the conversation: each message as a message item
/// (its text, or `input_text` and `input_image` parts), an assistant's tool
/// calls as
/// `function_call` items after it, a tool's result as `function_call_output`.
fn items(r: &ProviderRequest) -> Vec<Item<'_>> {
    let mut items = Vec::with_capacity(r.messages.len());
    for m in &r.messages {
        if m.role == Role::Tool {
            let call_id = m.tool_call_id.as_deref().unwrap_or_default();
            items.push(Item::Output {
                kind: "function_call_output",
                call_id,
                output: &m.content,
            });
            continue;
        }
        let role = match m.role {
            Role::System => "system",
            Role::Assistant => "assistant",
            _ => "user",
        };
        if m.images.is_empty() && (!m.content.is_empty() || m.tool_calls.is_empty()) {
            let content = Content::Text(&m.content);
            items.push(Item::Message { role, content });
        } else if !m.images.is_empty() {
            let text = (!m.content.is_empty()).then_some(Part::InputText { text: &m.content });
            let images = m.images.iter().map(|image| Part::InputImage {
                image_url: &image.url,
                detail: image.detail.as_deref(),
            });
            let content = Content::Parts(text.into_iter().chain(images).collect());
            items.push(Item::Message { role, content });
        }
        items.extend(m.tool_calls.iter().map(|c| Item::Call {
            kind: "function_call",
            call_id: &c.id,
            name: &c.name,
            arguments: &c.arguments,
        }));
    }
    items
}

/// The OpenAI Responses API as a provider's wire format.
pub struct ResponsesWire;

impl WireFormat for ResponsesWire {
    const PATH: &'static str = "/responses";
    const NATIVE_TERMS: &'static [&'static str] = &["text.format", "json_schema"];
    /// OpenAI's, whichever of its APIs the completions go to.
    type Embeddings = crate::embeddings::OpenAiEmbeddings;

    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        // OpenAI's, whichever of its APIs.
        super::OpenAiWire::headers(key, key_header)
    }

    fn takes_reasoning(model: &str) -> bool {
        crate::upstream::reasoning_family(model)
    }

    fn body(model: &str, r: &ProviderRequest, delivery: Delivery, upstream: &Upstream) -> Vec<u8> {
        let tools = r.tools.as_ref().map(|t| {
            (t.tools.iter())
                .map(|tool| FunctionTool {
                    kind: "function",
                    name: &tool.name,
                    description: tool.description.as_deref(),
                    parameters: &tool.parameters,
                    strict: tool.strict,
                })
                .collect()
        });
        let tool_choice = r.tools.as_ref().map(|t| match &t.choice {
            ToolChoice::Auto => Choice::Word("auto"),
            ToolChoice::None => Choice::Word("none"),
            ToolChoice::Required => Choice::Word("required"),
            ToolChoice::Tool(name) => Choice::Function {
                kind: "function",
                name,
            },
        });
        let text = (r.structured.as_ref())
            .filter(|s| s.mode == StructuredOutput::Native)
            .map(|s| TextConfig {
                format: JsonSchemaFormat {
                    kind: "json_schema",
                    name: "response",
                    schema: &s.schema,
                    strict: false,
                },
            });
        let body = ResponsesBody {
            model,
            instructions: r.system_prompt.as_deref(),
            input: items(r),
            max_output_tokens: r.max_tokens,
            temperature: r.temperature,
            text,
            tools,
            tool_choice,
            parallel_tool_calls: r.tools.as_ref().and_then(|t| t.parallel),
            reasoning: r
                .reasoning_effort
                .as_deref()
                .map(|effort| Reasoning { effort }),
            stream: delivery == Delivery::Streamed,
            store: (!upstream.extra_body.contains_key("store")).then_some(false),
            extra: &upstream.extra_body,
        };
        serde_json::to_vec(&body).expect("a responses body serializes")
    }

    type Answer = ResponseAnswer;
    type Event = ResponseEvent;

    fn event(kind: &str, data: &str) -> serde_json::Result<Self::Event> {
        crate::adapter::by_data(kind, data)
    }
    type Folded = Folded;

    fn reply(answer: ResponseAnswer) -> Result<ProviderReply, ProviderFailure> {
        answer.into_reply()
    }

    fn fold(acc: &mut Folded, event: ResponseEvent) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(_: &mut Folded) {}

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply()
    }

    fn settle(reply: &mut ProviderReply, request: &ProviderRequest) {
        settle(reply, &request.stop_sequences);
    }
}

/// Cuts `reply`'s text at the first of `stops` it holds, as a provider that
/// takes stop sequences would have stopped there (the Responses API takes
/// none). The tokens after it were generated, and are counted as reported.
pub(super) fn settle(reply: &mut ProviderReply, stops: &[String]) {
    let first = (stops.iter())
        .filter(|s| !s.is_empty())
        .filter_map(|s| reply.content.find(s.as_str()))
        .min();
    if let Some(at) = first {
        reply.content.truncate(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::StopReason;

    #[test]
    fn a_reply_is_cut_at_the_first_stop_sequence_it_holds() {
        let mut reply = ProviderReply {
            content: "one. two END three STOP".into(),
            tool_calls: Vec::new(),
            stop: StopReason::Stop,
            input_tokens: None,
            cached_input_tokens: None,
            cache_write_input_tokens: None,
            reasoning_tokens: None,
            output_tokens: None,
            model: None,
            status: None,
            thinking: Vec::new(),
        };
        settle(&mut reply, &["STOP".into(), "END".into(), String::new()]);
        assert_eq!(reply.content, "one. two ");
        settle(&mut reply, &["absent".into()]);
        assert_eq!(reply.content, "one. two ", "nothing to cut");
    }
}

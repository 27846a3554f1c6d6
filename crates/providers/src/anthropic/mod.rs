//! The Anthropic Messages API. Native structured output is a forced tool
//! call whose input schema is the caller's `responseSchema`; a call's own
//! tools go beside it. Tool calls are `tool_use` blocks, tool results
//! `tool_result` blocks in the user's turn.

mod answer;

use super::adapter::{Delivery, WireFormat};
use super::http::ApiKey;
use super::upstream::{KeyHeader, Upstream};
use answer::{Event, Folded, Message};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{
    Image, ImageSource, Message as WireMessage, PromptCache, Role, StructuredOutput, ThinkingBlock,
    ThinkingConfig, ToolChoice as Choice,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
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
    system: Option<System<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice<'a>>,
    /// The client's `thinking`, as it sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a ThinkingConfig>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    /// The config's `extraBody`.
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// One turn; consecutive turns of one role are merged into one. A turn
/// of text alone is a string, as it always was; one with a tool call or a
/// tool's result is a list of blocks.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: TurnContent<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum TurnContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

/// The system prompt: one text, or, when the client set prompt-caching
/// breakpoints in it, its blocks as the client sent them.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

/// A content block, with the client's prompt-caching breakpoint when it
/// set one there.
#[derive(Serialize)]
struct Block<'a> {
    #[serde(flatten)]
    kind: BlockKind<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

impl<'a> From<BlockKind<'a>> for Block<'a> {
    fn from(kind: BlockKind<'a>) -> Self {
        Self {
            kind,
            cache_control: None,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockKind<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Cow<'a, RawValue>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
    },
    Image {
        source: ImageBlockSource<'a>,
    },
    /// A thinking block of an earlier answer, passed back as it came (its
    /// own `type`, `thinking` or `redacted_thinking`).
    #[serde(untagged)]
    Thinking(&'a ThinkingBlock),
}

/// An `image` block's `source`: the bytes inline, or a URL Anthropic
/// fetches.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageBlockSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

impl<'a> ImageBlockSource<'a> {
    /// The source of `image`, checked when its request was.
    fn of(image: &'a Image) -> Self {
        match image.source() {
            Ok(ImageSource::Data { media_type, base64 }) => Self::Base64 {
                media_type,
                data: base64,
            },
            Ok(ImageSource::Url(_)) | Err(_) => Self::Url { url: &image.url },
        }
    }
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

#[derive(Serialize)]
struct ToolChoice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_parallel_tool_use: Option<bool>,
}

/// The blocks of one message of the conversation.
fn blocks(m: &WireMessage) -> Vec<Block<'_>> {
    if m.role == Role::Tool {
        let id = m.tool_call_id.as_deref().unwrap_or_default();
        return vec![
            BlockKind::ToolResult {
                tool_use_id: id,
                content: &m.content,
            }
            .into(),
        ];
    }
    // Images first, then the text: the order Anthropic's guide recommends.
    let images = m.images.iter().map(|image| BlockKind::Image {
        source: ImageBlockSource::of(image),
    });
    let text = (!m.content.is_empty()).then(|| BlockKind::Text {
        text: Cow::Borrowed(&m.content),
    });
    images
        .chain(text)
        .chain(m.tool_calls.iter().map(|c| BlockKind::ToolUse {
            id: &c.id,
            name: &c.name,
            input: super::adapter::object(&c.arguments),
        }))
        .map(Block::from)
        .collect()
}

/// Appends a message to the conversation: merged into the last turn when
/// it is of the same role (as text joined by a blank line while both are
/// text alone, as blocks otherwise).
fn push_turn<'a>(
    turns: &mut Vec<Turn<'a>>,
    role: &'static str,
    m: &'a WireMessage,
    thinking: &'a [ThinkingBlock],
) {
    let plain = m.tool_calls.is_empty()
        && m.role != Role::Tool
        && m.images.is_empty()
        && thinking.is_empty();
    match turns.last_mut() {
        Some(last) if last.role == role => match (&mut last.content, plain) {
            (TurnContent::Text(text), true) => {
                let text = text.to_mut();
                text.push_str("\n\n");
                text.push_str(&m.content);
            }
            (content, _) => {
                let mut merged = match std::mem::replace(content, TurnContent::Blocks(Vec::new())) {
                    TurnContent::Text(text) => vec![BlockKind::Text { text }.into()],
                    TurnContent::Blocks(blocks) => blocks,
                };
                merged.extend(thinking.iter().map(|t| BlockKind::Thinking(t).into()));
                merged.extend(blocks(m));
                *content = TurnContent::Blocks(merged);
            }
        },
        _ => turns.push(Turn {
            role,
            content: match plain {
                true => TurnContent::Text(Cow::Borrowed(&m.content)),
                false => TurnContent::Blocks(
                    thinking
                        .iter()
                        .map(|t| BlockKind::Thinking(t).into())
                        .chain(blocks(m))
                        .collect(),
                ),
            },
        }),
    }
}

/// Sets `cache_control` on the last block of the last turn (a turn of
/// text alone becomes its one text block): the end of the message just
/// pushed, where the client set its breakpoint.
fn mark_last<'a>(turns: &mut [Turn<'a>], cache_control: &'a Value) {
    let Some(last) = turns.last_mut() else { return };
    if let TurnContent::Text(text) = &mut last.content {
        let text = std::mem::take(text);
        last.content = TurnContent::Blocks(vec![BlockKind::Text { text }.into()]);
    }
    if let TurnContent::Blocks(blocks) = &mut last.content
        && let Some(block) = blocks.last_mut()
    {
        block.cache_control = Some(cache_control);
    }
}

/// The system prompt of a body: `parts` joined as one text, or, when the
/// client set breakpoints in its system blocks and `parts` begins with
/// them (a prompt-mode instruction or a system message may follow), those
/// blocks and then the rest as one more.
fn system<'a>(parts: &[&'a str], cache: Option<&'a PromptCache>) -> Option<System<'a>> {
    if parts.is_empty() {
        return None;
    }
    let joined = parts.join("\n\n");
    let Some((blocks, rest)) = cache.and_then(|c| c.split_system(&joined)) else {
        return Some(System::Text(joined));
    };
    let mut out: Vec<Block<'a>> = blocks
        .iter()
        .filter(|b| !b.text.is_empty())
        .map(|b| Block {
            kind: BlockKind::Text {
                text: Cow::Borrowed(&b.text),
            },
            cache_control: b.cache_control.as_ref(),
        })
        .collect();
    if !rest.is_empty() {
        out.push(
            BlockKind::Text {
                text: Cow::Owned(rest.to_owned()),
            }
            .into(),
        );
    }
    Some(System::Blocks(out))
}

impl WireFormat for AnthropicWire {
    const PATH: &'static str = "/messages";
    const NATIVE_TERMS: &'static [&'static str] = &["tool_choice", "tools", "input_schema"];
    const PROMPT_CACHE: bool = true;
    const THINKING: bool = true;

    type Embeddings = crate::embeddings::NoEmbeddings;

    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(k) = key {
            headers.push(key_header.header(k.expose()));
        }
        headers
    }

    /// The request body for one attempt. System-role messages join the
    /// system prompt; consecutive turns of one role are merged.
    fn body(model: &str, r: &ProviderRequest, delivery: Delivery, upstream: &Upstream) -> Vec<u8> {
        let (system, said) = crate::conversation::conversation(r);
        let cache = r.prompt_cache.as_deref();
        let mut messages: Vec<Turn<'_>> = Vec::new();
        for m in said {
            push_turn(&mut messages, m.role, m.message, m.thinking);
            if let Some(cache_control) = m.breakpoint {
                mark_last(&mut messages, cache_control);
            }
        }
        let native = r
            .structured
            .as_ref()
            .filter(|s| s.mode == StructuredOutput::Native);
        let (tools, tool_choice) = tools(r, native.map(|s| &*s.schema));
        let body = MessagesBody {
            model: r.model.as_deref().unwrap_or(model),
            max_tokens: r.max_tokens,
            messages,
            system: self::system(&system, cache),
            temperature: r.temperature,
            stop_sequences: &r.stop_sequences,
            tools,
            tool_choice,
            thinking: r.thinking.as_deref().and_then(|t| t.config.as_ref()),
            stream: delivery == Delivery::Streamed,
            extra: &upstream.extra_body,
        };
        serde_json::to_vec(&body).expect("a messages body serializes")
    }

    type Answer = Message;
    type Event = Event;

    fn event(kind: &str, data: &str) -> serde_json::Result<Self::Event> {
        super::adapter::by_data(kind, data)
    }
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

    /// A native structured request's answer is the input of its `respond`
    /// call: that call is the reply's text, not a tool call.
    fn settle(reply: &mut ProviderReply, request: &ProviderRequest) {
        super::adapter::settle_forced_tool(reply, request, TOOL);
    }
}

/// The tools of a request body and the choice among them: the call's own
/// tools, and for native structured output the `respond` tool whose input
/// schema is the `responseSchema` (forced when the call offers no tools,
/// and beside them otherwise: the answer is then a call of either).
fn tools<'a>(
    r: &'a ProviderRequest,
    native: Option<&'a Value>,
) -> (Vec<Tool<'a>>, Option<ToolChoice<'a>>) {
    let offered = r.tools.as_ref();
    let mut tools: Vec<Tool<'a>> = offered
        .map(|t| {
            t.tools
                .iter()
                .enumerate()
                .map(|(i, tool)| Tool {
                    name: &tool.name,
                    description: tool.description.as_deref(),
                    input_schema: &tool.parameters,
                    cache_control: r.prompt_cache.as_deref().and_then(|c| c.tool(i)),
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(schema) = native {
        tools.push(Tool {
            name: TOOL,
            description: Some("Respond with a value that satisfies the input schema."),
            input_schema: schema,
            cache_control: None,
        });
    }
    let choice = |kind, name| ToolChoice {
        kind,
        name,
        disable_parallel_tool_use: offered.and_then(|t| t.parallel).map(|p| !p),
    };
    let tool_choice = match (offered.map(|t| &t.choice), native) {
        (None, None) => None,
        (None | Some(Choice::None), Some(_)) => Some(ToolChoice {
            disable_parallel_tool_use: None,
            ..choice("tool", Some(TOOL))
        }),
        (Some(Choice::Auto), None) => Some(choice("auto", None)),
        (Some(Choice::None), None) => Some(ToolChoice {
            disable_parallel_tool_use: None,
            ..choice("none", None)
        }),
        // With the respond tool beside them, the answer must be a call.
        (Some(Choice::Auto | Choice::Required), Some(_)) | (Some(Choice::Required), None) => {
            Some(choice("any", None))
        }
        (Some(Choice::Tool(name)), _) => Some(choice("tool", Some(name))),
    };
    (tools, tool_choice)
}

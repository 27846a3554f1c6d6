//! A Converse request body, borrowing from the request: the system
//! prompt apart, the conversation as `user` and `assistant` turns of
//! content blocks (text, images as bytes, `toolUse`, `toolResult`, the
//! reasoning of earlier answers), `inferenceConfig`, the tools
//! ([`super::tools`]), the client's prompt-caching breakpoints as
//! `cachePoint` blocks, and its extended thinking in
//! `additionalModelRequestFields`, where Bedrock hands a model its own
//! parameters.

use super::tools::{ToolConfig, tool_config};
use crate::upstream::Upstream;
use callai_engine::ProviderRequest;
use callai_wire::{
    ImageSource, Message, PromptCache, Role, StructuredOutput, ThinkingBlock, ThinkingConfig,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    /// The config's `extraBody` (`additionalModelRequestFields`,
    /// `guardrailConfig`, …), with the client's thinking ([`extra`]).
    #[serde(flatten)]
    extra: Cow<'a, Map<String, Value>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum SystemBlock<'a> {
    Text(Cow<'a, str>),
    CachePoint(CachePoint<'a>),
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
    ReasoningContent(Reasoning<'a>),
    CachePoint(CachePoint<'a>),
}

#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
}

/// An image's bytes, base64 as JSON carries them.
#[derive(Serialize)]
struct Bytes<'a> {
    bytes: &'a str,
}

/// An earlier answer's reasoning, passed back as it came: its text and
/// signature, or the provider's encrypted content.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Reasoning<'a> {
    ReasoningText { text: &'a str, signature: &'a str },
    RedactedContent(&'a str),
}

/// A prompt-caching breakpoint: the content before it is cached, for
/// `ttl` (`5m` or `1h`) when the client gave one.
#[derive(Serialize)]
pub(super) struct CachePoint<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'a str>,
}

impl<'a> CachePoint<'a> {
    /// The cache point of a client's `cache_control` (`{"type":
    /// "ephemeral", "ttl": "1h"}`, checked by the drop-in).
    pub(super) fn of(cache_control: &'a Value) -> Self {
        Self {
            kind: "default",
            ttl: cache_control.get("ttl").and_then(Value::as_str),
        }
    }
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

/// The blocks of message `m`, led by `thinking` (its reasoning, when it is
/// an answer that had some): images, then its text, then its tool calls;
/// a tool's result is a `toolResult`. An image must be inline bytes
/// ([`super::BedrockWire`]'s `unsendable` refuses a URL before a request).
fn blocks<'a>(m: &'a Message, thinking: &'a [ThinkingBlock]) -> Vec<Block<'a>> {
    if m.role == Role::Tool {
        return vec![Block::ToolResult {
            tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
            content: [Text { text: &m.content }],
        }];
    }
    let reasoning = thinking.iter().map(|t| {
        Block::ReasoningContent(match t {
            ThinkingBlock::Thinking {
                thinking,
                signature,
            } => Reasoning::ReasoningText {
                text: thinking,
                signature,
            },
            ThinkingBlock::RedactedThinking { data } => Reasoning::RedactedContent(data),
        })
    });
    let images = m.images.iter().filter_map(|image| match image.source() {
        Ok(ImageSource::Data { media_type, base64 }) => Some(Block::Image {
            format: media_type.strip_prefix("image/").unwrap_or(media_type),
            source: Bytes { bytes: base64 },
        }),
        _ => None,
    });
    let text = (!m.content.is_empty()).then(|| Block::Text(Cow::Borrowed(&m.content)));
    reasoning
        .chain(images)
        .chain(text)
        .chain(m.tool_calls.iter().map(|c| Block::ToolUse {
            tool_use_id: &c.id,
            name: &c.name,
            input: crate::adapter::object(&c.arguments),
        }))
        .collect()
}

/// The system prompt: `parts` joined as one text, or, when the client set
/// breakpoints in its system blocks, those blocks each followed by its
/// cache point, then the rest (a prompt-mode instruction, a system
/// message) as one more text.
fn system<'a>(parts: &[&'a str], cache: Option<&'a PromptCache>) -> Vec<SystemBlock<'a>> {
    if parts.is_empty() {
        return Vec::new();
    }
    let joined = parts.join("\n\n");
    let Some((blocks, rest)) = cache.and_then(|c| c.split_system(&joined)) else {
        return vec![SystemBlock::Text(Cow::Owned(joined))];
    };
    let mut out = Vec::new();
    for block in blocks {
        if !block.text.is_empty() {
            out.push(SystemBlock::Text(Cow::Borrowed(&block.text)));
        }
        if let Some(point) = &block.cache_control {
            out.push(SystemBlock::CachePoint(CachePoint::of(point)));
        }
    }
    if !rest.is_empty() {
        out.push(SystemBlock::Text(Cow::Owned(rest.to_owned())));
    }
    out
}

/// The config's `extraBody`, with the client's `thinking` (as it sent it,
/// the shape Anthropic's models on Bedrock read) set in its
/// `additionalModelRequestFields`; borrowed when there is none.
fn extra<'a>(
    extra: &'a Map<String, Value>,
    thinking: Option<&ThinkingConfig>,
) -> Cow<'a, Map<String, Value>> {
    let Some(config) = thinking else {
        return Cow::Borrowed(extra);
    };
    let mut extra = extra.clone();
    let fields = extra
        .entry("additionalModelRequestFields")
        .or_insert_with(|| Value::Object(Map::new()));
    if !fields.is_object() {
        *fields = Value::Object(Map::new());
    }
    if let Value::Object(fields) = fields {
        let thinking = serde_json::to_value(config).expect("a thinking config serializes");
        fields.insert("thinking".to_owned(), thinking);
    }
    Cow::Owned(extra)
}

/// The request body for one attempt: system-role messages join the
/// system prompt; consecutive turns of one role are merged, a message's
/// breakpoint ending the blocks it became.
pub(super) fn body(r: &ProviderRequest, upstream: &Upstream) -> Vec<u8> {
    let (system, said) = crate::conversation::conversation(r);
    let cache = r.prompt_cache.as_deref();
    let mut messages: Vec<Turn<'_>> = Vec::new();
    for m in said {
        let mut content = blocks(m.message, m.thinking);
        if let Some(point) = m.breakpoint {
            content.push(Block::CachePoint(CachePoint::of(point)));
        }
        match messages.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(content),
            _ => messages.push(Turn {
                role: m.role,
                content,
            }),
        }
    }
    let native = r
        .structured
        .as_ref()
        .filter(|s| s.mode == StructuredOutput::Native);
    let body = Body {
        messages,
        system: self::system(&system, cache),
        inference_config: InferenceConfig {
            max_tokens: r.max_tokens,
            temperature: r.temperature,
            stop_sequences: &r.stop_sequences,
        },
        tool_config: tool_config(r, native.map(|s| &*s.schema)),
        extra: extra(
            &upstream.extra_body,
            r.thinking.as_deref().and_then(|t| t.config.as_ref()),
        ),
    };
    serde_json::to_vec(&body).expect("a Converse body serializes")
}

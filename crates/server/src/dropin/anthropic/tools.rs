//! Tool use in the Messages API: `tools`, `tool_choice`, and the
//! `tool_use` and `tool_result` blocks of a conversation, mapped onto the
//! engine's tools and messages. Only client tools (`custom`, or no `type`)
//! exist for this host; a server tool is refused naming its `type`.

use super::cache::Breakpoints;
use crate::dropin::parts::{TextOrParts, text_of};
use crate::error::ApiError;
use callai_engine::wire::{Message, Role, ThinkingBlock, Tool, ToolCall, ToolChoice};
use serde::Deserialize;
use serde_json::Value;

/// A tool offered. Keys this host does not use are ignored, as they do
/// not change what the answer means; its `cache_control` is kept for the
/// provider.
#[derive(Debug, Deserialize)]
pub(super) struct AnthropicTool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: String,
    description: Option<String>,
    input_schema: Option<Value>,
    cache_control: Option<Value>,
}

/// `tool_choice`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AnthropicChoice {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    disable_parallel_tool_use: Option<bool>,
}

/// The engine's tools of `tools`, each refusal naming its `param`.
pub(super) fn tools(
    tools: Vec<AnthropicTool>,
    breakpoints: &mut Breakpoints,
) -> Result<Vec<Tool>, ApiError> {
    if tools.is_empty() {
        return Err(ApiError::invalid("tools", "must hold at least one tool"));
    }
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if let Some(kind) = t.kind.as_deref().filter(|k| *k != "custom") {
                return Err(ApiError::invalid(
                    &format!("tools[{i}].type"),
                    format!("{kind:?}: this host offers client tools (custom) only"),
                ));
            }
            let Some(schema) = t.input_schema else {
                return Err(ApiError::invalid(
                    &format!("tools[{i}].input_schema"),
                    "is required",
                ));
            };
            breakpoints.tool(i, t.cache_control)?;
            Ok(Tool {
                name: t.name,
                description: t.description,
                parameters: schema,
                strict: None,
            })
        })
        .collect()
}

/// The engine's choice, and whether parallel calls are allowed.
pub(super) fn choice(c: AnthropicChoice) -> Result<(ToolChoice, Option<bool>), ApiError> {
    let choice = match (c.kind.as_str(), c.name) {
        ("auto", _) => ToolChoice::Auto,
        ("any", _) => ToolChoice::Required,
        ("none", _) => ToolChoice::None,
        ("tool", Some(name)) => ToolChoice::Tool(name),
        ("tool", None) => {
            return Err(ApiError::invalid("tool_choice.name", "is required"));
        }
        (other, _) => {
            return Err(ApiError::invalid(
                "tool_choice.type",
                format!("{other:?}: must be auto, any, tool or none"),
            ));
        }
    };
    Ok((choice, c.disable_parallel_tool_use.map(|d| !d)))
}

/// Appends the engine's messages of one Messages API turn: a user's
/// `tool_result` blocks are each a tool's result (before the turn's text),
/// an assistant's `tool_use` blocks its tool calls, and its `thinking` and
/// `redacted_thinking` blocks are kept in `thinking` with the index of the
/// message they lead.
pub(super) fn turn(
    i: usize,
    role: Role,
    content: TextOrParts,
    out: &mut Vec<Message>,
    breakpoints: &mut Breakpoints,
    thinking: &mut Vec<(usize, Vec<ThinkingBlock>)>,
) -> Result<(), ApiError> {
    let parts = match content {
        TextOrParts::Text(text) => {
            out.push(Message::new(role, text));
            return Ok(());
        }
        TextOrParts::Parts(parts) => parts,
    };
    let (mut text, mut calls, mut images) = (String::new(), Vec::new(), Vec::new());
    let mut thought = Vec::new();
    // The breakpoint of the turn's own message (its text, image or
    // tool_use blocks); a tool_result's goes on its own message.
    let mut pending = None;
    for (j, part) in parts.into_iter().enumerate() {
        let param = || format!("messages[{i}].content[{j}]");
        let breakpoint = breakpoints.block(i, j, &part)?;
        if part.kind.as_deref() != Some("tool_result") && breakpoint.is_some() {
            pending = breakpoint.clone();
        }
        match (part.kind.as_deref(), role) {
            (Some("text"), _) => text.push_str(part.text.as_deref().unwrap_or_default()),
            (Some("image"), Role::User) => {
                images.push(crate::dropin::images::from_source(&param(), part.source)?);
            }
            (Some("tool_use"), Role::Assistant) => calls.push(ToolCall {
                id: part.id.unwrap_or_default(),
                name: part.name.unwrap_or_default(),
                arguments: part
                    .input
                    .map_or_else(|| "{}".to_owned(), |input| input.get().to_owned()),
            }),
            (Some("thinking" | "redacted_thinking"), Role::Assistant) => {
                thought.push(super::thinking::block(&param(), part)?);
            }
            (Some("tool_result"), Role::User) => {
                let Some(id) = part.tool_use_id else {
                    return Err(ApiError::invalid(
                        &format!("{}.tool_use_id", param()),
                        "is required",
                    ));
                };
                let result = match part.content {
                    Some(content) => text_of(&format!("{}.content", param()), "block", content)?,
                    None => String::new(),
                };
                let result = match part.is_error {
                    Some(true) => format!("Error: {result}"),
                    _ => result,
                };
                out.push(Message::tool_result(id, result));
                if let Some(value) = breakpoint {
                    breakpoints.message(out.len() - 1, value);
                }
            }
            (kind, _) => {
                return Err(ApiError::invalid(
                    &param(),
                    format!(
                        "a block of type {:?} in a {} turn: this host takes text, a user's image and tool_result blocks and an assistant's tool_use, thinking and redacted_thinking",
                        kind.unwrap_or("?"),
                        role.as_str()
                    ),
                ));
            }
        }
    }
    match (calls.is_empty(), text.is_empty(), role) {
        (false, _, _) => out.push(Message::tool_calls(text, calls)),
        // A turn of tool results alone adds no user text.
        (true, true, Role::User)
            if images.is_empty() && out.last().is_some_and(|m| m.role == Role::Tool) => {}
        (true, _, _) => out.push(Message {
            images,
            ..Message::new(role, text)
        }),
    }
    if let Some(value) = pending
        && !out.is_empty()
    {
        breakpoints.message(out.len() - 1, value);
    }
    // An assistant turn always adds its message, which its thinking leads.
    if !thought.is_empty() {
        thinking.push((out.len() - 1, thought));
    }
    Ok(())
}

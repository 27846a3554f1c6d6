//! Function calling in the Chat Completions API: `tools`, `tool_choice`,
//! an assistant's `tool_calls` and a `tool` message's result, mapped onto
//! the engine's tools and back. Only function tools exist for this host;
//! another `type` is refused naming it.

use crate::error::ApiError;
use callai_engine::wire::{Tool, ToolCall, ToolChoice};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tool offered: `{"type": "function", "function": {...}}`. Another type
/// carries keys of its own (`custom`), so its `type` is what is refused.
#[derive(Debug, Deserialize)]
pub(super) struct ChatTool {
    #[serde(rename = "type")]
    kind: String,
    function: Option<FunctionSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionSpec {
    name: String,
    description: Option<String>,
    /// Absent: the function takes no arguments.
    parameters: Option<Value>,
    strict: Option<bool>,
}

/// `tool_choice`: a word, or one function.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum ChatToolChoice {
    Word(String),
    Function {
        #[serde(rename = "type")]
        kind: String,
        function: Option<NamedFunction>,
    },
}

#[derive(Debug, Deserialize)]
pub(super) struct NamedFunction {
    name: String,
}

/// A tool call in an assistant's message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChatToolCall {
    id: String,
    #[serde(rename = "type")]
    _kind: Option<IgnoredAny>,
    function: CalledFunction,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalledFunction {
    name: String,
    arguments: String,
}

/// The engine's tools of `tools`, each refusal naming its `param`.
pub(super) fn tools(tools: Vec<ChatTool>) -> Result<Vec<Tool>, ApiError> {
    if tools.is_empty() {
        return Err(ApiError::invalid("tools", "must hold at least one tool"));
    }
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let function = match (t.kind.as_str(), t.function) {
                ("function", Some(f)) => f,
                ("function", None) => {
                    return Err(ApiError::invalid(
                        &format!("tools[{i}].function"),
                        "is required",
                    ));
                }
                (other, _) => {
                    return Err(ApiError::invalid(
                        &format!("tools[{i}].type"),
                        format!("{other:?}: this host offers function tools only"),
                    ));
                }
            };
            Ok(Tool {
                name: function.name,
                description: function.description,
                parameters: function
                    .parameters
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                strict: function.strict,
            })
        })
        .collect()
}

/// The engine's choice of `tool_choice`.
pub(super) fn choice(choice: ChatToolChoice) -> Result<ToolChoice, ApiError> {
    match choice {
        ChatToolChoice::Word(word) => match word.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(ApiError::invalid(
                "tool_choice",
                format!("{other:?}: must be auto, none, required or a function"),
            )),
        },
        ChatToolChoice::Function {
            kind,
            function: Some(f),
        } if kind == "function" => Ok(ToolChoice::Tool(f.name)),
        ChatToolChoice::Function { kind, .. } => Err(ApiError::invalid(
            "tool_choice",
            format!(
                "{kind:?}: this host takes auto, none, required or {{\"type\": \"function\", \"function\": {{\"name\"}}}}"
            ),
        )),
    }
}

/// The engine's calls of an assistant's `tool_calls`.
pub(super) fn calls(calls: Vec<ChatToolCall>) -> Vec<ToolCall> {
    calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
        })
        .collect()
}

/// A tool call as an answer carries it (a stream's delta with its `index`).
#[derive(Serialize)]
pub(super) struct OutCall<'a> {
    pub function: OutFunction<'a>,
    pub id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[derive(Serialize)]
pub(super) struct OutFunction<'a> {
    pub arguments: &'a str,
    pub name: &'a str,
}

/// The answer's `tool_calls`, indexed for a stream's delta.
pub(super) fn out_calls(calls: &[ToolCall], indexed: bool) -> Vec<OutCall<'_>> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| OutCall {
            function: OutFunction {
                arguments: &c.arguments,
                name: &c.name,
            },
            id: &c.id,
            index: indexed.then_some(i),
            kind: "function",
        })
        .collect()
}

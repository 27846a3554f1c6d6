//! The mock's tool calls: scripted (`"toolCalls": [{"name", "arguments"}]`,
//! arguments as a JSON object, or as a string for text that is not one),
//! and, unscripted, a call of the forced tool with a small instance of its
//! `parameters`.

use super::instance::instance;
use crate::provider::ProviderRequest;
use callai_wire::{ToolCall, ToolChoice};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MockToolCall {
    /// The call's id; `call_N` (its place in the reply, from 1) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool called.
    pub name: String,
    /// The arguments: an object, or a string sent as the arguments' text
    /// as it is (to script a malformed call).
    pub arguments: Value,
}

/// The tool calls of a scripted reply, as a provider would send them.
pub(super) fn scripted(calls: Vec<MockToolCall>) -> Vec<ToolCall> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: c.id.unwrap_or_else(|| format!("call_{}", i + 1)),
            name: c.name,
            arguments: match c.arguments {
                Value::String(text) => text,
                other => other.to_string(),
            },
        })
        .collect()
}

/// The unscripted mock's call of the tool `request` forces (the named one,
/// or the first when any is required); `None` when it forces none.
pub(super) fn forced(request: &ProviderRequest) -> Option<MockToolCall> {
    let tools = request.tools.as_ref()?;
    let tool = match &tools.choice {
        ToolChoice::Tool(name) => tools.tools.iter().find(|t| &t.name == name)?,
        ToolChoice::Required => tools.tools.first()?,
        ToolChoice::Auto | ToolChoice::None => return None,
    };
    Some(MockToolCall {
        id: None,
        name: tool.name.clone(),
        arguments: instance(&tool.parameters),
    })
}

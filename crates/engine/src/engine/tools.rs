//! A call's tools, compiled, and the judging of an answer's tool calls. A
//! tool call is structured output: its arguments must be a JSON object
//! valid against its tool's `parameters`, it must name a tool the request
//! offers, and a request whose `toolChoice` forces a call must get one. A
//! call that breaks one of these is a schema violation, and its complaint
//! (made of the schemas and the tools' names alone, never of the reply)
//! names the tool.

use super::schema::{CompiledSchema, SchemaCache};
use crate::provider::{ProviderReply, ToolsRequest};
use callai_wire::{CallError, CallRequest, ToolCall, ToolChoice};
use serde_json::Value;
use std::sync::Arc;

/// The tools of one call, each with its compiled `parameters`.
#[derive(Clone)]
pub(crate) struct CompiledTools {
    request: ToolsRequest,
    schemas: Arc<[CompiledSchema]>,
}

impl std::fmt::Debug for CompiledTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledTools").finish_non_exhaustive()
    }
}

impl CompiledTools {
    /// The tools `request` offers, compiled through `cache` (each schema
    /// under the same cost gate as a `responseSchema`); `None` when it
    /// offers none. A schema refused is named `tools[i].parameters`.
    pub(crate) fn compile(
        request: &CallRequest,
        cache: &SchemaCache,
        owner: &Arc<str>,
    ) -> Result<Option<Self>, CallError> {
        let Some(tools) = request.tools.as_ref().filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let schemas = tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                cache
                    .compile(&tool.parameters, owner)
                    .map_err(|e| CallError::validation(format!("tools[{i}].parameters"), e.message))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Self {
            request: ToolsRequest {
                tools: tools.clone().into(),
                choice: request.tool_choice.clone().unwrap_or(ToolChoice::Auto),
                parallel: request.parallel_tool_calls,
            },
            schemas: schemas.into(),
        }))
    }

    /// What each attempt offers the provider.
    pub(crate) fn request(&self) -> &ToolsRequest {
        &self.request
    }

    /// Whether the answer must be a tool call.
    pub(crate) fn forced(&self) -> bool {
        self.request.choice.forces_a_call()
    }

    /// The length of the tools' JSON text, as each request carries it.
    pub(crate) fn text_bytes(&self) -> u64 {
        // Each schema's length was counted once, when it was compiled (and
        // is cached with it): not written out again per call.
        self.request
            .tools
            .iter()
            .zip(self.schemas.iter())
            .map(|(t, schema)| {
                t.name.len() as u64
                    + t.description.as_ref().map_or(0, |d| d.len() as u64)
                    + schema.text_bytes()
                    + TOOL_OVERHEAD
            })
            .sum()
    }

    /// The most work checking `bytes` of arguments may take.
    pub(crate) fn work_for(&self, bytes: usize) -> u64 {
        self.schemas
            .iter()
            .map(|s| s.work_for(bytes))
            .max()
            .unwrap_or(0)
    }

    /// Whether `reply` is to be judged as a tool answer: it calls a tool,
    /// or the request forces one.
    pub(crate) fn applies_to(&self, reply: &ProviderReply) -> bool {
        !reply.tool_calls.is_empty() || self.forced()
    }

    /// `Ok` when every call of `reply` is usable; else the complaint.
    pub(crate) fn check(&self, reply: &ProviderReply) -> Result<(), String> {
        let names = || {
            let names: Vec<&str> = self.request.tools.iter().map(|t| t.name.as_str()).collect();
            names.join(", ")
        };
        if reply.tool_calls.is_empty() {
            return Err(match &self.request.choice {
                ToolChoice::Tool(name) => {
                    format!("the answer is text, but toolChoice requires a call of tool `{name}`")
                }
                _ => format!(
                    "the answer is text, but toolChoice requires a tool call (one of: {})",
                    names()
                ),
            });
        }
        if self.request.choice == ToolChoice::None {
            return Err("toolChoice is none, but the answer calls a tool".to_owned());
        }
        if self.request.parallel == Some(false) && reply.tool_calls.len() > 1 {
            return Err(format!(
                "parallelToolCalls is false, but the answer makes {} tool calls: make one",
                reply.tool_calls.len()
            ));
        }
        for call in &reply.tool_calls {
            let Some(i) = self.request.tools.iter().position(|t| t.name == call.name) else {
                // The name is the model's text, never quoted back (a name of
                // a tool name's shape can still carry what the model was
                // told: `card_4111111111111111_exp_0927`); the offered ones
                // are named instead.
                return Err(format!(
                    "the answer calls a tool that is not offered: call one of {}",
                    names()
                ));
            };
            if let ToolChoice::Tool(required) = &self.request.choice
                && required != &call.name
            {
                return Err(format!(
                    "the answer calls tool `{}`, but toolChoice requires tool `{required}`",
                    call.name
                ));
            }
            // Some models send no arguments for a tool that takes none.
            let text = match call.arguments.trim() {
                "" => "{}",
                text => text,
            };
            let arguments: Value = serde_json::from_str(text).map_err(|e| {
                format!(
                    "tool `{}`: the arguments are not JSON ({})",
                    call.name,
                    e.classify_message()
                )
            })?;
            if !arguments.is_object() {
                return Err(format!(
                    "tool `{}`: the arguments must be a JSON object",
                    call.name
                ));
            }
            self.schemas[i]
                .check(&arguments)
                .map_err(|complaint| format!("tool `{}`: {complaint}", call.name))?;
        }
        Ok(())
    }
}

/// Bytes each tool adds around its name, description and schema.
const TOOL_OVERHEAD: u64 = 64;

/// What a JSON error says of where and what, never the text it read.
trait ClassifyMessage {
    fn classify_message(&self) -> String;
}

impl ClassifyMessage for serde_json::Error {
    fn classify_message(&self) -> String {
        let what = match self.classify() {
            serde_json::error::Category::Eof => "it ends too early",
            serde_json::error::Category::Syntax => "a syntax error",
            serde_json::error::Category::Data | serde_json::error::Category::Io => "unreadable",
        };
        format!("{what} at line {} column {}", self.line(), self.column())
    }
}

/// `calls` with an id each of their own: a provider that gives two calls
/// one id (or none) would have a client answer both with one result. The
/// first keeps its id; a repeat becomes `ID_2`, `ID_3`, ... (whichever is
/// free), an empty one `call_N` by its place.
pub(crate) fn unique_ids(mut calls: Vec<ToolCall>) -> Vec<ToolCall> {
    let mut seen = std::collections::HashSet::with_capacity(calls.len());
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = format!("call_{}", i + 1);
        }
        if !seen.contains(&call.id) {
            seen.insert(call.id.clone());
            continue;
        }
        let fresh = (2..)
            .map(|n| format!("{}_{n}", call.id))
            .find(|id| !seen.contains(id))
            .expect("a free id");
        seen.insert(fresh.clone());
        call.id = fresh;
    }
    calls
}

#[cfg(test)]
mod tests;

//! A Responses request as far as this host reads it: its fields, its
//! function tools and `tool_choice`, its `text.format`, and what of it the
//! answer repeats ([`Echo`]). What changes what the answer means and the
//! host cannot honour (built-in tools, `background`, `include`d extras,
//! `reasoning`, stored conversations) is refused naming its field; what
//! does not (`user`, `metadata`, `store`, `top_p`, `truncation`, the
//! prompt-cache hints) is repeated in the answer and not sent on.

use super::input::Input;
use crate::dropin::api::Extension;
use crate::error::ApiError;
use callai_engine::wire::{Tool, ToolChoice};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// A Responses request, as far as this host reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponsesRequest {
    pub(super) model: String,
    /// A string or items, read in [`ResponsesRequest::input`]; kept as
    /// sent for a stored response's `input_items`.
    pub(super) input: Option<Box<RawValue>>,
    pub(super) instructions: Option<String>,
    pub(super) tools: Option<Vec<ResponseTool>>,
    pub(super) tool_choice: Option<ResponseToolChoice>,
    pub(super) parallel_tool_calls: Option<bool>,
    pub(super) text: Option<TextConfig>,
    pub(super) max_output_tokens: Option<u32>,
    pub(super) temperature: Option<f64>,
    pub(super) top_p: Option<f64>,
    pub(super) metadata: Option<Map<String, Value>>,
    pub(super) user: Option<String>,
    pub(super) store: Option<bool>,
    pub(super) stream: Option<bool>,
    pub(super) truncation: Option<String>,
    pub(super) include: Option<Vec<String>>,
    pub(super) previous_response_id: Option<String>,
    // Refused when they ask for something: the host cannot honour them.
    pub(super) reasoning: Option<ReasoningConfig>,
    pub(super) background: Option<bool>,
    pub(super) conversation: Option<Value>,
    pub(super) prompt: Option<Value>,
    pub(super) context_management: Option<Value>,
    pub(super) max_tool_calls: Option<u32>,
    pub(super) top_logprobs: Option<u32>,
    // Dropped: they do not change what the answer means.
    #[serde(rename = "stream_options")]
    _stream_options: Option<IgnoredAny>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    #[serde(rename = "safety_identifier")]
    _safety_identifier: Option<IgnoredAny>,
    #[serde(rename = "prompt_cache_key")]
    _prompt_cache_key: Option<IgnoredAny>,
    #[serde(rename = "prompt_cache_retention")]
    _prompt_cache_retention: Option<IgnoredAny>,
    /// Codex CLI's own turn metadata.
    #[serde(rename = "client_metadata")]
    _client_metadata: Option<IgnoredAny>,
    /// The RFC 0248 extension (`extra_body={"callai": {...}}`).
    pub(super) callai: Option<Extension>,
}

/// A tool offered. A function tool is `{"type": "function", "name",
/// "description"?, "parameters"?, "strict"?}`; a built-in tool carries keys
/// of its own, so its `type` is what is refused.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct ResponseTool {
    #[serde(rename = "type")]
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

/// `reasoning`: how much a reasoning model thinks, and whether it sums its
/// reasoning up. The effort goes to a target whose model takes it (the
/// call is refused naming `reasoning.effort` where none does; `none` asks
/// for nothing); no reasoning item is produced here, so a summary asked
/// for is none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReasoningConfig {
    pub(super) effort: Option<String>,
    #[serde(rename = "summary")]
    _summary: Option<IgnoredAny>,
    #[serde(rename = "generate_summary")]
    _generate_summary: Option<IgnoredAny>,
}

/// `tool_choice`: a word, or `{"type": "function", "name"}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub(super) enum ResponseToolChoice {
    Word(String),
    Named {
        #[serde(rename = "type")]
        kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

/// `text`: the answer's format, and a verbosity this host does not send.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TextConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<TextFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verbosity: Option<String>,
}

/// `text.format`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum TextFormat {
    Text,
    JsonObject,
    JsonSchema {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// `reasoning` as a response repeats it: the effort asked for, and no
/// summary (none is produced here).
#[derive(Debug, Clone, Serialize)]
pub(super) struct EchoReasoning {
    pub(super) effort: Option<String>,
    pub(super) summary: Option<()>,
}

/// What of the request a response repeats, as OpenAI's does.
#[derive(Debug, Clone, Serialize)]
pub struct Echo {
    pub(super) created_at: u64,
    pub(super) instructions: Option<String>,
    pub(super) max_output_tokens: Option<u32>,
    pub(super) metadata: Map<String, Value>,
    pub(super) parallel_tool_calls: bool,
    pub(super) previous_response_id: Option<String>,
    pub(super) reasoning: EchoReasoning,
    pub(super) store: bool,
    pub(super) temperature: Option<f64>,
    pub(super) text: TextConfig,
    pub(super) tool_choice: ResponseToolChoice,
    pub(super) tools: Vec<ResponseTool>,
    pub(super) top_p: Option<f64>,
    pub(super) truncation: String,
    pub(super) user: Option<String>,
}

impl ResponsesRequest {
    /// Refuses what the host cannot honour, naming it.
    pub(super) fn refuse_unhonoured(&self) -> Result<(), ApiError> {
        let no = |param: &str, why: &str| Err(ApiError::invalid(param, why));
        if self.background == Some(true) {
            return no(
                "background",
                "this host answers while the request is open: send it without `background`",
            );
        }
        let present = [
            ("conversation", self.conversation.as_ref()),
            ("prompt", self.prompt.as_ref()),
            ("context_management", self.context_management.as_ref()),
        ];
        // `null`, `{}` and an object of nulls ask for nothing.
        let asked = |v: &Value| match v {
            Value::Null => false,
            Value::Object(map) => map.values().any(|v| !v.is_null()),
            _ => true,
        };
        if let Some((param, _)) = present.iter().find(|(_, v)| v.is_some_and(asked)) {
            return no(
                param,
                "this host does not offer it: a callAI call is text, a JSON schema or tool calls",
            );
        }
        if self.max_tool_calls.is_some() {
            return no("max_tool_calls", "this host runs no built-in tools");
        }
        if self.top_logprobs.is_some_and(|n| n > 0) {
            return no(
                "top_logprobs",
                "this host does not return log probabilities",
            );
        }
        // A response here holds no reasoning items, so their encrypted
        // content is there as asked (there is none); nothing else it adds.
        let mut extra = self.include.iter().flatten();
        if let Some(value) = extra.find(|v| *v != "reasoning.encrypted_content") {
            return Err(ApiError::invalid(
                "include",
                format!("{value:?}: this host adds nothing to a response's output"),
            ));
        }
        match self.truncation.as_deref() {
            None | Some("disabled" | "auto") => Ok(()),
            Some(other) => Err(ApiError::invalid(
                "truncation",
                format!("{other:?}: must be auto or disabled"),
            )),
        }
    }

    /// The reasoning effort asked for, `none` (no reasoning) left out.
    pub(super) fn reasoning_effort(&self) -> Option<&str> {
        let effort = self.reasoning.as_ref()?.effort.as_deref()?;
        (effort != "none").then_some(effort)
    }

    /// `input`, read: a string or items.
    pub(super) fn input(&self) -> Result<Input, ApiError> {
        let Some(raw) = &self.input else {
            return Err(ApiError::invalid("input", "is required"));
        };
        serde_json::from_str(raw.get()).map_err(|e| {
            ApiError::invalid(
                "input",
                format!("is neither a string nor a list of items: {e}"),
            )
        })
    }

    /// `input` as a list of items, as JSON, as the caller sent it (a
    /// string as the one user message it is).
    pub(super) fn input_items(&self) -> Result<String, ApiError> {
        let Some(raw) = &self.input else {
            return Err(ApiError::invalid("input", "is required"));
        };
        if !raw.get().starts_with('"') {
            return Ok(raw.get().to_owned());
        }
        let text: String = serde_json::from_str(raw.get())
            .map_err(|e| ApiError::invalid("input", format!("is not a string: {e}")))?;
        let item = json!({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": text}]});
        Ok(json!([item]).to_string())
    }

    /// The response's JSON schema of `text.format`.
    pub(super) fn response_schema(&self) -> Option<Value> {
        let format = self.text.as_ref()?.format.as_ref()?;
        match format {
            TextFormat::JsonObject => Some(json!({"type": "object"})),
            TextFormat::JsonSchema { schema, .. } => Some(schema.clone().unwrap_or(json!({}))),
            TextFormat::Text => None,
        }
    }

    /// What the answer repeats, as of now.
    pub(super) fn echo(&self) -> Echo {
        Echo {
            created_at: crate::dropin::api::unix_now(),
            instructions: self.instructions.clone(),
            max_output_tokens: self.max_output_tokens,
            metadata: self.metadata.clone().unwrap_or_default(),
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
            previous_response_id: self.previous_response_id.clone(),
            reasoning: EchoReasoning {
                effort: self.reasoning_effort().map(str::to_owned),
                summary: None,
            },
            store: self.store.unwrap_or(true),
            temperature: self.temperature,
            text: self.text.clone().unwrap_or(TextConfig {
                format: Some(TextFormat::Text),
                verbosity: None,
            }),
            tool_choice: (self.tool_choice.clone())
                .unwrap_or_else(|| ResponseToolChoice::Word("auto".to_owned())),
            tools: self.tools.clone().unwrap_or_default(),
            top_p: self.top_p,
            truncation: self
                .truncation
                .clone()
                .unwrap_or_else(|| "disabled".to_owned()),
            user: self.user.clone(),
        }
    }
}

/// The engine's tools of `tools` (none for an empty list), each refusal
/// naming its `param`.
pub(super) fn tools(tools: &[ResponseTool]) -> Result<Option<Vec<Tool>>, ApiError> {
    if tools.is_empty() {
        return Ok(None);
    }
    let read = |(i, t): (usize, &ResponseTool)| {
        if t.kind != "function" {
            return Err(ApiError::invalid(
                &format!("tools[{i}].type"),
                format!(
                    "{:?}: a built-in tool this host does not run; it offers function tools only",
                    t.kind
                ),
            ));
        }
        let Some(name) = t.name.clone() else {
            return Err(ApiError::invalid(
                &format!("tools[{i}].name"),
                "is required",
            ));
        };
        Ok(Tool {
            name,
            description: t.description.clone(),
            parameters: (t.parameters.clone())
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            strict: t.strict,
        })
    };
    tools
        .iter()
        .enumerate()
        .map(read)
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The engine's choice of `tool_choice`.
pub(super) fn choice(choice: &ResponseToolChoice) -> Result<ToolChoice, ApiError> {
    match choice {
        ResponseToolChoice::Word(word) => match word.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(ApiError::invalid(
                "tool_choice",
                format!("{other:?}: must be auto, none, required or a function"),
            )),
        },
        ResponseToolChoice::Named {
            kind,
            name: Some(name),
        } if kind == "function" => Ok(ToolChoice::Tool(name.clone())),
        ResponseToolChoice::Named { kind, .. } => Err(ApiError::invalid(
            "tool_choice",
            format!(
                "{kind:?}: this host takes auto, none, required or {{\"type\": \"function\", \"name\"}}"
            ),
        )),
    }
}

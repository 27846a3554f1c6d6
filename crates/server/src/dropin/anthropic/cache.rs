//! Prompt caching in the Messages API: the `cache_control` breakpoints a
//! client sets on system blocks, message blocks and tools, gathered into
//! the [`PromptCache`] the engine hands an Anthropic-kind provider (which
//! sends them on where they were). A breakpoint on a message's block is
//! kept at the end of the engine message that block became: a text block's
//! is its turn's text, a `tool_result`'s its tool result.

use crate::dropin::parts::{Part, TextOrParts};
use crate::error::ApiError;
use callai_engine::wire::{PromptCache, SystemBlock};
use serde_json::Value;

/// What a request's breakpoints are gathered into as it is mapped.
#[derive(Debug, Default)]
pub(super) struct Breakpoints {
    cache: PromptCache,
}

impl Breakpoints {
    /// Notes `field`, the first field to set a breakpoint, for a refusal.
    fn saw(&mut self, field: impl FnOnce() -> String) {
        if self.cache.field.is_empty() {
            self.cache.field = field();
        }
    }

    /// The system prompt's blocks, before they are joined into its text:
    /// kept when one of them carries a breakpoint.
    pub(super) fn system(&mut self, system: &TextOrParts) -> Result<(), ApiError> {
        let TextOrParts::Parts(parts) = system else {
            return Ok(());
        };
        let Some(first) = parts.iter().position(|p| p.cache_control.is_some()) else {
            return Ok(());
        };
        self.saw(|| format!("system[{first}].cache_control"));
        for (j, part) in parts.iter().enumerate() {
            let cache_control = checked(&format!("system[{j}].cache_control"), part)?;
            self.cache.system.push(SystemBlock {
                text: part.text.clone().unwrap_or_default(),
                cache_control,
            });
        }
        Ok(())
    }

    /// A breakpoint on block `j` of message `i`, if it has one.
    pub(super) fn block(
        &mut self,
        i: usize,
        j: usize,
        part: &Part,
    ) -> Result<Option<Value>, ApiError> {
        let field = format!("messages[{i}].content[{j}].cache_control");
        let value = checked(&field, part)?;
        if value.is_some() {
            self.saw(|| field);
        }
        Ok(value)
    }

    /// Engine message `at` ends with a breakpoint.
    pub(super) fn message(&mut self, at: usize, cache_control: Value) {
        self.cache.messages.retain(|(i, _)| *i != at);
        self.cache.messages.push((at, cache_control));
    }

    /// Tool `i` carries a breakpoint.
    pub(super) fn tool(&mut self, i: usize, cache_control: Option<Value>) -> Result<(), ApiError> {
        let field = format!("tools[{i}].cache_control");
        if let Some(value) = cache_control {
            check(&field, &value)?;
            self.saw(|| field);
            self.cache.tools.push((i, value));
        }
        Ok(())
    }

    /// The breakpoints, when there are any.
    pub(super) fn into_cache(self) -> Option<PromptCache> {
        (!self.cache.is_empty()).then_some(self.cache)
    }
}

/// `part`'s breakpoint, checked.
fn checked(field: &str, part: &Part) -> Result<Option<Value>, ApiError> {
    match &part.cache_control {
        None | Some(Value::Null) => Ok(None),
        Some(value) => check(field, value).map(|()| Some(value.clone())),
    }
}

/// A breakpoint is `{"type": "ephemeral"}`, with a `ttl` of `5m` or `1h`
/// when it gives one: what the Messages API takes, refused here by name
/// rather than by the provider after the call was counted.
fn check(field: &str, value: &Value) -> Result<(), ApiError> {
    let Some(object) = value.as_object() else {
        return Err(ApiError::invalid(
            field,
            "must be an object: {\"type\": \"ephemeral\"}",
        ));
    };
    if object.get("type").and_then(Value::as_str) != Some("ephemeral") {
        return Err(ApiError::invalid(
            &format!("{field}.type"),
            "must be \"ephemeral\", the one kind of breakpoint the Messages API has",
        ));
    }
    if let Some(ttl) = object.get("ttl")
        && !matches!(ttl.as_str(), Some("5m" | "1h"))
    {
        return Err(ApiError::invalid(
            &format!("{field}.ttl"),
            "must be \"5m\" or \"1h\"",
        ));
    }
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "type" | "ttl"))
    {
        return Err(ApiError::invalid(
            &format!("{field}.{key}"),
            "is not a key of a breakpoint (type, ttl)",
        ));
    }
    Ok(())
}

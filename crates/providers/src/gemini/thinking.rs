//! How much a Gemini model thinks, as `generationConfig.thinkingConfig`:
//! from the call's extended thinking (`thinking`, Anthropic's parameter:
//! its `budget_tokens` become `thinkingBudget`, `adaptive` is Google's
//! dynamic budget, -1, and `disabled` is 0) or, failing that, its
//! reasoning effort (OpenAI's `reasoning_effort`, mapped to budgets as
//! LiteLLM maps them). And the config's `extraBody.generationConfig`
//! merged under the host's own fields, never replacing them.

use callai_engine::ProviderRequest;
use callai_wire::ThinkingKind;
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// `thinkingConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThinkingConfig {
    /// Tokens the model may think with; -1: as many as it decides; 0: none.
    thinking_budget: i64,
}

/// Whether `model` (its last `/` segment) thinks: Gemini 2.5 and later.
pub(super) fn thinks(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    name.starts_with("gemini-2.5") || name.starts_with("gemini-3")
}

/// The call's thinking as Gemini takes it, if it asked for any.
pub(super) fn config(r: &ProviderRequest) -> Option<ThinkingConfig> {
    let from_thinking = r
        .thinking
        .as_ref()
        .and_then(|t| t.config.as_ref())
        .map(|c| match c.kind {
            ThinkingKind::Enabled => c.budget_tokens.map_or(-1, i64::from),
            ThinkingKind::Adaptive | ThinkingKind::BetweenTools => -1,
            ThinkingKind::Disabled => 0,
        });
    let from_effort = || {
        let budget = match r.reasoning_effort.as_deref()? {
            "none" => 0,
            "minimal" => 128,
            "low" => 1024,
            "medium" => 2048,
            "high" => 4096,
            _ => return None,
        };
        Some(budget)
    };
    from_thinking
        .or_else(from_effort)
        .map(|thinking_budget| ThinkingConfig { thinking_budget })
}

/// The body's `generationConfig`: `own` (the host's fields), with those of
/// `extraBody.generationConfig` it does not set; and the rest of
/// `extraBody`, without that key.
pub(super) fn merged<'a>(
    own: Value,
    extra: &'a Map<String, Value>,
) -> (Value, Cow<'a, Map<String, Value>>) {
    let Some(Value::Object(more)) = extra.get("generationConfig") else {
        return (own, Cow::Borrowed(extra));
    };
    let mut own = match own {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for (key, value) in more {
        own.entry(key.clone()).or_insert_with(|| value.clone());
    }
    let mut rest = extra.clone();
    rest.remove("generationConfig");
    (Value::Object(own), Cow::Owned(rest))
}

//! Extended thinking in the Messages API: the `thinking` parameter,
//! checked here against what the Messages API itself would refuse (after
//! the call was counted), and the thinking blocks of earlier assistant
//! turns, which an Anthropic-kind provider is sent back as they came.

use crate::dropin::parts::Part;
use crate::error::ApiError;
use callai_engine::wire::{Thinking, ThinkingBlock, ThinkingConfig, ThinkingKind, ToolChoice};

/// The least `budget_tokens` the Messages API takes.
const MIN_BUDGET: u32 = 1024;

/// What the request carries of thinking, checked: `None` when it has
/// neither a `thinking` parameter nor thinking blocks.
pub(super) fn checked(
    config: Option<ThinkingConfig>,
    history: Vec<(usize, Vec<ThinkingBlock>)>,
    max_tokens: u32,
    structured: bool,
    choice: Option<&ToolChoice>,
) -> Result<Option<Thinking>, ApiError> {
    if let Some(config) = &config {
        check(config, max_tokens)?;
        if config.kind != ThinkingKind::Disabled {
            if structured {
                return Err(ApiError::invalid(
                    "thinking",
                    "this host asks Anthropic for structured output (output_config.format) \
                     with a forced tool call, which the Messages API does not take with \
                     thinking: leave one of them out",
                ));
            }
            if matches!(choice, Some(ToolChoice::Required | ToolChoice::Tool(_))) {
                return Err(ApiError::invalid(
                    "tool_choice.type",
                    "must be auto or none with thinking: the Messages API does not force a \
                     tool call while the model thinks",
                ));
            }
        }
    }
    if config.is_none() && history.is_empty() {
        return Ok(None);
    }
    Ok(Some(Thinking { config, history }))
}

/// `thinking` as the Messages API takes it: `enabled` with a budget of at
/// least 1024 tokens and under `max_tokens`; a budget with no other type.
fn check(config: &ThinkingConfig, max_tokens: u32) -> Result<(), ApiError> {
    match (config.kind, config.budget_tokens) {
        (ThinkingKind::Enabled, None) => Err(ApiError::invalid(
            "thinking.budget_tokens",
            "is required with type enabled",
        )),
        (ThinkingKind::Enabled, Some(budget)) if budget < MIN_BUDGET => Err(ApiError::invalid(
            "thinking.budget_tokens",
            format!("{budget}: must be at least {MIN_BUDGET}"),
        )),
        (ThinkingKind::Enabled, Some(budget)) if budget >= max_tokens => Err(ApiError::invalid(
            "thinking.budget_tokens",
            format!("{budget}: must be less than max_tokens ({max_tokens})"),
        )),
        (ThinkingKind::Enabled, Some(_)) | (_, None) => Ok(()),
        (kind, Some(_)) => Err(ApiError::invalid(
            "thinking.budget_tokens",
            format!("is taken with type enabled only, not {kind:?}"),
        )),
    }
}

/// An assistant turn's `thinking` or `redacted_thinking` block, at
/// `param`: passed back as the answer gave it, signature or data included.
pub(super) fn block(param: &str, part: Part) -> Result<ThinkingBlock, ApiError> {
    if part.kind.as_deref() == Some("redacted_thinking") {
        let Some(data) = part.data else {
            return Err(ApiError::invalid(
                &format!("{param}.data"),
                "is required: a redacted thinking block is passed back as the answer gave it",
            ));
        };
        return Ok(ThinkingBlock::RedactedThinking { data });
    }
    let Some(signature) = part.signature else {
        return Err(ApiError::invalid(
            &format!("{param}.signature"),
            "is required: a thinking block is passed back as the answer gave it",
        ));
    };
    Ok(ThinkingBlock::Thinking {
        thinking: part.thinking.unwrap_or_default(),
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::wire::ThinkingDisplay;

    fn config(kind: ThinkingKind, budget: Option<u32>) -> ThinkingConfig {
        ThinkingConfig {
            kind,
            budget_tokens: budget,
            display: None,
        }
    }

    fn refusal(r: Result<Option<Thinking>, ApiError>) -> String {
        format!("{:?}", r.unwrap_err())
    }

    #[test]
    fn a_budget_is_checked_as_the_messages_api_would() {
        let ok = checked(
            Some(config(ThinkingKind::Enabled, Some(2048))),
            Vec::new(),
            4096,
            false,
            None,
        );
        assert!(ok.unwrap().unwrap().required());
        for (budget, max, says) in [
            (None, 4096, "is required"),
            (Some(1000), 4096, "at least 1024"),
            (Some(4096), 4096, "less than max_tokens (4096)"),
        ] {
            let r = checked(
                Some(config(ThinkingKind::Enabled, budget)),
                Vec::new(),
                max,
                false,
                None,
            );
            let r = refusal(r);
            assert!(
                r.contains("thinking.budget_tokens") && r.contains(says),
                "{r}"
            );
        }
        let adaptive = ThinkingConfig {
            display: Some(ThinkingDisplay::Omitted),
            ..config(ThinkingKind::Adaptive, Some(2048))
        };
        let r = refusal(checked(Some(adaptive), Vec::new(), 4096, false, None));
        assert!(r.contains("type enabled only"), "{r}");
    }

    #[test]
    fn thinking_refuses_what_forces_a_tool_and_disabled_refuses_nothing() {
        let on = || Some(config(ThinkingKind::Adaptive, None));
        let r = refusal(checked(on(), Vec::new(), 4096, true, None));
        assert!(
            r.contains("\"thinking\"") && r.contains("forced tool"),
            "{r}"
        );
        let r = refusal(checked(
            on(),
            Vec::new(),
            4096,
            false,
            Some(&ToolChoice::Required),
        ));
        assert!(r.contains("tool_choice.type"), "{r}");
        let off = checked(
            Some(config(ThinkingKind::Disabled, None)),
            Vec::new(),
            4096,
            true,
            Some(&ToolChoice::Required),
        );
        assert!(!off.unwrap().unwrap().required());
        assert_eq!(checked(None, Vec::new(), 4096, false, None).unwrap(), None);
    }
}

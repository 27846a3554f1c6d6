//! Extended thinking a client asked for: the Messages API's `thinking`
//! parameter and the signed thinking blocks of a conversation, which a
//! drop-in keeps beside the request (never in its JSON) for a provider
//! that takes them (an Anthropic-kind one), and a reply's thinking blocks,
//! kept beside the result for the drop-in's answer.

use serde::{Deserialize, Serialize};

/// The `thinking` parameter, as the Messages API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkingConfig {
    /// `enabled`, `adaptive`, `between_tools` or `disabled`.
    #[serde(rename = "type")]
    pub kind: ThinkingKind,
    /// For `enabled`: the tokens the model may think with (at least 1024,
    /// fewer than `max_tokens`). They are output tokens, priced as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    /// `summarized` or `omitted`: how the thinking is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<ThinkingDisplay>,
}

/// How a model thinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingKind {
    /// With a budget of its own.
    Enabled,
    /// As much as the model decides.
    Adaptive,
    /// Between tool calls.
    BetweenTools,
    /// Not at all.
    Disabled,
}

/// How thinking is shown in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingDisplay {
    /// Summarized text.
    Summarized,
    /// No text; the signature alone.
    Omitted,
}

/// One thinking block of an answer, passed back unchanged in the
/// assistant turn it came in (the signature proves it to the provider).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingBlock {
    /// The model's thinking and its signature.
    Thinking {
        /// The text (empty when its display is `omitted`).
        thinking: String,
        /// The provider's opaque signature.
        signature: String,
    },
    /// Thinking the provider encrypted.
    RedactedThinking {
        /// The encrypted thinking.
        data: String,
    },
}

/// What a request carries of extended thinking.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thinking {
    /// The parameter, when the client sent one.
    pub config: Option<ThinkingConfig>,
    /// The thinking blocks of earlier assistant turns: each with the index
    /// of the request's message it leads.
    pub history: Vec<(usize, Vec<ThinkingBlock>)>,
}

impl Thinking {
    /// Whether a provider must take thinking for the call to be sent to
    /// it: the client asked the model to think. Earlier turns' blocks alone
    /// are dropped for a provider that does not (they are that other
    /// model's, and sign nothing there).
    pub fn required(&self) -> bool {
        self.config
            .as_ref()
            .is_some_and(|c| c.kind != ThinkingKind::Disabled)
    }

    /// The thinking blocks that lead message `i`.
    pub fn blocks_of(&self, i: usize) -> &[ThinkingBlock] {
        self.history
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(&[], |(_, b)| b.as_slice())
    }
}

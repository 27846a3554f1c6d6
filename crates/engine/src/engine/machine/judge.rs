//! Judging a reply: the classifier's verdict turned into the call's result,
//! or into the failure that decides the next request (with the events a
//! refusal, a truncation or a recovery emits, and the next request's
//! budget and extra instructions).

use super::{CallMachine, Failure};
use crate::engine::classify::Verdict;
use crate::engine::prompts::Extra;
use crate::engine::reason::RequestReason;
use crate::events::Event;
use crate::provider::{ProviderReply, StopReason};
use callai_wire::{CallResult, ErrorCode, FinishReason, Usage};

impl CallMachine<'_> {
    /// Turns a classified reply into the result, or into the failure that
    /// decides the next request.
    pub(super) fn judge(
        &mut self,
        verdict: Verdict,
        reply: ProviderReply,
    ) -> Result<CallResult, Failure> {
        let reason = verdict.reason();
        let failure = |code, message: String, next| Failure {
            code,
            reason,
            message,
            next,
            retry_after: None,
        };
        match verdict {
            Verdict::Accept { data, recovery } => {
                if let Some(path) = recovery {
                    self.events.push_with(|| Event::RecoveryApplied {
                        node_id: self.node_id.into(),
                        path: path.as_str().into(),
                    });
                }
                Ok(self.result(reply, data))
            }
            Verdict::TooLarge { limit, bytes } => {
                let message = format!(
                    "limits.maxResponseBytes: a reply of {bytes} bytes (its text and its tool \
                     calls) is over the limit of {limit}"
                );
                Err(failure(ErrorCode::LimitExceeded, message, None))
            }
            Verdict::Refusal => {
                self.events.push_with(|| Event::Refusal {
                    node_id: self.node_id.into(),
                    provider: self.provider.into(),
                    model: self.model.clone(),
                });
                let message = format!("the provider refused ({})", reply.stop.as_str());
                Err(failure(ErrorCode::EnvelopeRefusal, message, None))
            }
            Verdict::Truncated => {
                self.events.push_with(|| Event::Truncated {
                    node_id: self.node_id.into(),
                    provider: self.provider.into(),
                    model: self.model.clone(),
                    stop_reason: reply.stop.as_str().into(),
                    output_token_count: reply.output_tokens,
                });
                let ceiling = self.config.retry.provider_max_tokens;
                let at_ceiling = self.grow && self.budget >= ceiling;
                if self.grow {
                    let factor = self.config.retry.truncation_budget_multiplier;
                    self.budget = self.budget.saturating_mul(factor).min(ceiling);
                }
                self.extra = Extra::Nothing;
                let message = match at_ceiling {
                    true => format!("truncated at the provider ceiling of {ceiling} tokens"),
                    false => "the reply was truncated by maxTokens".to_owned(),
                };
                // A clamped retry that truncates again is terminal.
                let next = (!at_ceiling).then_some(RequestReason::Truncation);
                Err(failure(
                    ErrorCode::EnvelopeTruncationUnrecoverable,
                    message,
                    next,
                ))
            }
            Verdict::ParseError(complaint) => {
                // One request left and the model keeps answering in prose:
                // spend it on the natural-language fallback.
                // The fallback quotes the reply, so its size is bounded
                // before the call starts (a budget reserves it): a reply
                // longer than that gets a corrective retry instead.
                let last = self.ledger.count() + 1 == self.cap;
                let quotable = reply.content.len() as u64
                    <= u64::from(self.budget) * crate::budget::FALLBACK_BYTES_PER_TOKEN;
                let (extra, next) = match last && quotable && self.config.retry.nl_fallback {
                    true => (Extra::Fallback(reply.content), RequestReason::Fallback),
                    false => (
                        Extra::Corrective(complaint.clone()),
                        RequestReason::ParseError,
                    ),
                };
                self.extra = extra;
                Err(failure(ErrorCode::EnvelopeInvalid, complaint, Some(next)))
            }
            Verdict::SchemaViolation(complaint) => {
                self.extra = Extra::Corrective(complaint.clone());
                let next = Some(RequestReason::SchemaViolation);
                Err(failure(ErrorCode::EnvelopeInvalid, complaint, next))
            }
            Verdict::ToolViolation(complaint) => {
                self.extra = Extra::ToolCorrective(complaint.clone());
                let next = Some(RequestReason::SchemaViolation);
                Err(failure(ErrorCode::EnvelopeInvalid, complaint, next))
            }
        }
    }

    /// The result of an accepted reply.
    fn result(&self, reply: ProviderReply, data: Option<serde_json::Value>) -> CallResult {
        let usage = (reply.input_tokens.is_some() || reply.output_tokens.is_some())
            .then(|| Usage::new(reply.input_tokens, reply.output_tokens));
        let finish_reason = match reply.stop_said() {
            StopReason::Stop => FinishReason::Stop,
            StopReason::Length => FinishReason::Length,
            StopReason::Refusal | StopReason::ContentFilter => FinishReason::ContentFilter,
            StopReason::ToolCall => FinishReason::ToolCall,
            StopReason::Other => FinishReason::Other,
        };
        let structured = data.is_some();
        let calls = !reply.tool_calls.is_empty();
        // Beside tool calls, the text is kept only when there is some.
        let text = !structured && (!calls || !reply.content.is_empty());
        CallResult {
            content: text.then_some(reply.content),
            data,
            tool_calls: calls.then(|| crate::engine::tools::unique_ids(reply.tool_calls)),
            usage,
            finish_reason: Some(finish_reason),
            model: Some(reply.model.unwrap_or_else(|| self.model.clone())),
            attempts: self
                .config
                .call_accounting
                .attempts
                .then(|| self.ledger.attempts(self.mode)),
            thinking: reply.thinking,
            cached_input_tokens: reply.cached_input_tokens,
            reasoning_tokens: reply.reasoning_tokens,
        }
    }
}

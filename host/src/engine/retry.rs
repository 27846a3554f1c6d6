//! The loop behind one call: send, classify, decide, count.

use super::attempts::Ledger;
use super::classify::{Verdict, classify};
use super::schema::CompiledSchema;
use crate::config::HostConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventSink};
use crate::provider::StopReason;
use crate::provider::{FailureKind, Provider, ProviderReply, ProviderRequest, StructuredRequest};
use crate::request::{CallRequest, Message, RetryPolicy};
use crate::result::{CallResult, FinishReason, StructuredMode, Usage};
use std::time::Duration;

/// The longest `retry-after` the host waits before giving up instead.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What the next request must carry, decided by the previous reply.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    /// The request as the caller wrote it (first attempt, or after a
    /// transport failure or a truncation: no corrective text).
    Plain,
    /// A corrective instruction quoting the validator.
    Corrective(String),
    /// The natural-language fallback, turning this prose into JSON.
    Fallback(String),
}

/// Why the call cannot go on (yet): the error it fails with if it stops here.
struct Failure {
    code: ErrorCode,
    reason: &'static str,
    message: String,
    retryable: bool,
    wait: Option<Duration>,
}

/// One call's state.
pub(super) struct CallLoop<'a> {
    config: &'a HostConfig,
    provider: &'a dyn Provider,
    node_id: &'a str,
    request: &'a CallRequest,
    events: &'a dyn EventSink,
    model: String,
    schema: Option<CompiledSchema>,
    cap: u32,
    grow: bool,
    budget: u32,
    mode: Option<StructuredMode>,
    ledger: Ledger,
}

impl<'a> CallLoop<'a> {
    pub(super) fn new(
        config: &'a HostConfig,
        provider: &'a dyn Provider,
        node_id: &'a str,
        request: &'a CallRequest,
        events: &'a dyn EventSink,
    ) -> Result<Self, CallError> {
        let retry = &config.retry;
        // §B is read only when advertised; §B.3: the policy narrows, never widens.
        let policy = match config.call_accounting.retry_policy {
            true => request.retry.unwrap_or_default(),
            false => RetryPolicy::default(),
        };
        let cap = policy.max_attempts.map_or(retry.max_retry_attempts, |n| {
            n.min(retry.max_retry_attempts)
        });
        let schema = request
            .response_schema
            .as_ref()
            .map(CompiledSchema::compile)
            .transpose()?;
        let mode = schema.as_ref().map(|_| match provider.supports_native() {
            true => StructuredMode::Native,
            false => StructuredMode::Prompt,
        });
        Ok(Self {
            config,
            provider,
            node_id,
            request,
            events,
            model: request
                .model
                .clone()
                .unwrap_or_else(|| provider.default_model().to_owned()),
            schema,
            cap,
            grow: policy.grow_max_tokens.unwrap_or(true),
            // The caller's budget (or the host default standing in), never
            // above the provider ceiling.
            budget: request
                .max_tokens
                .unwrap_or(retry.default_max_tokens)
                .min(retry.provider_max_tokens),
            mode,
            ledger: Ledger::new(),
        })
    }

    pub(super) async fn run(mut self) -> Result<CallResult, CallError> {
        let mut next = Next::Plain;
        loop {
            let provider_request = self.build(&next);
            let sent = self.provider.complete(&provider_request).await;
            let failure = match sent {
                Err(f) if !f.was_sent() => {
                    let failure = Failure {
                        code: ErrorCode::ProviderUnavailable,
                        reason: "unknown",
                        message: f.to_string(),
                        retryable: false,
                        wait: None,
                    };
                    return Err(self.give_up(failure));
                }
                Err(f) => {
                    self.count(None, None);
                    next = Next::Plain;
                    let native_refused = f.kind == FailureKind::NativeUnsupported
                        && self.mode == Some(StructuredMode::Native);
                    if native_refused {
                        // The model rejected native structured output: the
                        // next attempt embeds the schema in the prompt.
                        self.mode = Some(StructuredMode::Prompt);
                    }
                    Failure {
                        code: match f.kind {
                            FailureKind::Rejected => ErrorCode::ProviderRejected,
                            _ => ErrorCode::ProviderUnavailable,
                        },
                        reason: "unknown",
                        message: f.to_string(),
                        retryable: f.kind == FailureKind::Transient || native_refused,
                        wait: f.retry_after,
                    }
                }
                Ok(reply) => {
                    self.count(reply.input_tokens, reply.output_tokens);
                    let max = self.config.limits.max_response_bytes;
                    if reply.content.len() as u64 > max {
                        let message = format!(
                            "limits.maxResponseBytes: a reply of {} bytes is over the limit of {max}",
                            reply.content.len()
                        );
                        let failure = Failure {
                            code: ErrorCode::LimitExceeded,
                            reason: "unknown",
                            message,
                            retryable: false,
                            wait: None,
                        };
                        return Err(self.give_up(failure));
                    }
                    let verdict = classify(&reply, self.schema.as_ref());
                    match self.judge(verdict, reply, &mut next) {
                        Ok(result) => return Ok(result),
                        Err(failure) => failure,
                    }
                }
            };
            if !failure.retryable || self.ledger.count() >= self.cap {
                return Err(self.give_up(failure));
            }
            self.events.emit(Event::RetryAttempted {
                node_id: self.node_id.into(),
                attempt: self.ledger.count() + 1,
                reason: failure.reason.into(),
                previous_error: Some(failure.message),
            });
            if matches!(next, Next::Fallback(_)) {
                self.events.emit(Event::NlToFormatEngaged {
                    node_id: self.node_id.into(),
                    original_envelope_type: "json-schema".into(),
                    fallback_calls: 1,
                });
            }
            if let Some(wait) = failure.wait {
                tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
            }
        }
    }

    /// Turns a classified reply into the result, or into the failure that
    /// decides the next request.
    fn judge(
        &mut self,
        verdict: Verdict,
        reply: ProviderReply,
        next: &mut Next,
    ) -> Result<CallResult, Failure> {
        // The RFC 0032 reason is the verdict's own spelling.
        let reason = verdict.reason();
        let failure = |code, message: String, retryable| Failure {
            code,
            reason,
            message,
            retryable,
            wait: None,
        };
        match verdict {
            Verdict::Accept { data, recovery } => {
                if let Some(path) = recovery {
                    self.events.emit(Event::RecoveryApplied {
                        node_id: self.node_id.into(),
                        path: path.as_str().into(),
                    });
                }
                Ok(self.result(reply, data))
            }
            Verdict::Refusal => {
                self.events.emit(Event::Refusal {
                    node_id: self.node_id.into(),
                    provider: self.provider.name().into(),
                    model: self.model.clone(),
                });
                let message = format!("the provider refused ({})", reply.stop.as_str());
                Err(failure(ErrorCode::EnvelopeRefusal, message, false))
            }
            Verdict::Truncated => {
                self.events.emit(Event::Truncated {
                    node_id: self.node_id.into(),
                    provider: self.provider.name().into(),
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
                *next = Next::Plain;
                let message = match at_ceiling {
                    true => format!("truncated at the provider ceiling of {ceiling} tokens"),
                    false => "the reply was truncated by maxTokens".to_owned(),
                };
                // A clamped retry that truncates again is terminal.
                Err(failure(
                    ErrorCode::EnvelopeTruncationUnrecoverable,
                    message,
                    !at_ceiling,
                ))
            }
            Verdict::ParseError(complaint) => {
                // One request left and the model keeps answering in prose:
                // spend it on the natural-language fallback.
                let last = self.ledger.count() + 1 == self.cap;
                *next = match last && self.config.retry.nl_fallback {
                    true => Next::Fallback(reply.content),
                    false => Next::Corrective(complaint.clone()),
                };
                Err(failure(ErrorCode::EnvelopeInvalid, complaint, true))
            }
            Verdict::SchemaViolation(complaint) => {
                *next = Next::Corrective(complaint.clone());
                Err(failure(ErrorCode::EnvelopeInvalid, complaint, true))
            }
        }
    }

    /// Records one request that reached the provider.
    fn count(&mut self, input_tokens: Option<u32>, output_tokens: Option<u32>) {
        self.ledger.record(output_tokens);
        self.events.emit(Event::ProviderUsage {
            provider: self.provider.name().into(),
            model: self.model.clone(),
            input_tokens,
            output_tokens,
            node_id: Some(self.node_id.into()),
            attempt: self.ledger.count(),
        });
    }

    /// The error the call fails with; `envelope.retry.exhausted` carries the
    /// number of requests actually sent (none: no event).
    fn give_up(&self, failure: Failure) -> CallError {
        let total = self.ledger.count();
        let mut error = CallError::new(failure.code, failure.message.clone());
        if total > 0 {
            self.events.emit(Event::RetryExhausted {
                node_id: self.node_id.into(),
                total_attempts: total,
                final_reason: failure.reason.into(),
                final_error: Some(failure.message),
            });
            error = error.with_detail("totalAttempts", total);
            if self.config.call_accounting.attempts {
                // What a result's attempts would have said, so that a pack
                // can budget a failed call too (a host extension, §A.6).
                let spent = self.ledger.attempts(None);
                if let Some(tokens) = spent.output_tokens {
                    error = error.with_detail("outputTokens", tokens);
                }
                error = error.with_detail("usageComplete", spent.usage_complete);
            }
        }
        error
    }

    fn result(&self, reply: ProviderReply, data: Option<serde_json::Value>) -> CallResult {
        let usage = (reply.input_tokens.is_some() || reply.output_tokens.is_some())
            .then(|| Usage::new(reply.input_tokens, reply.output_tokens));
        let finish_reason = match reply.stop {
            StopReason::Stop => FinishReason::Stop,
            StopReason::Length => FinishReason::Length,
            StopReason::Refusal | StopReason::ContentFilter => FinishReason::ContentFilter,
            StopReason::ToolCall => FinishReason::ToolCall,
            StopReason::Other => FinishReason::Other,
        };
        let structured = data.is_some();
        CallResult {
            content: (!structured).then_some(reply.content),
            data,
            usage,
            finish_reason: Some(finish_reason),
            model: Some(reply.model.unwrap_or_else(|| self.model.clone())),
            attempts: self
                .config
                .call_accounting
                .attempts
                .then(|| self.ledger.attempts(self.mode)),
        }
    }

    /// The provider request for the next attempt.
    fn build(&self, next: &Next) -> ProviderRequest {
        let r = self.request;
        // The schema's text goes into a prompt only in prompt mode and in
        // the fallback; a native attempt never renders it.
        let schema_text = || r.response_schema.as_ref().map(|s| s.to_string());
        let mut system_prompt = r.system_prompt.clone();
        let mut messages = r.messages.clone();
        match next {
            Next::Plain => {}
            Next::Corrective(complaint) => messages.push(Message::user(format!(
                "Your previous reply could not be used: {complaint}. Reply again with only \
                 a JSON value that satisfies the required JSON Schema, and nothing else."
            ))),
            Next::Fallback(prose) => {
                system_prompt =
                    Some("You convert text into JSON. Reply with only the JSON value.".to_owned());
                messages = vec![Message::user(format!(
                    "Turn the following text into a JSON value that satisfies the JSON \
                     Schema below.\n\nSchema:\n{}\n\nText:\n{prose}",
                    schema_text().as_deref().unwrap_or("{}")
                ))];
            }
        }
        if self.mode == Some(StructuredMode::Prompt)
            && let Some(schema_text) = schema_text()
        {
            let instruction = format!(
                "Reply with only a JSON value that satisfies this JSON Schema, with no \
                 prose and no markdown fence:\n{schema_text}"
            );
            system_prompt = Some(match system_prompt {
                Some(s) => format!("{s}\n\n{instruction}"),
                None => instruction,
            });
        }
        ProviderRequest {
            model: Some(self.model.clone()),
            system_prompt,
            messages,
            temperature: r.temperature,
            max_tokens: self.budget,
            stop_sequences: r.stop_sequences.clone().unwrap_or_default(),
            structured: self
                .mode
                .zip(r.response_schema.clone())
                .map(|(mode, schema)| StructuredRequest { mode, schema }),
        }
    }
}

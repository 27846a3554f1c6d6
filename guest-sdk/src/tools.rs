//! Tool calls: a small loop the pack drives. The model asks for tools, the
//! pack runs them and sends their results back, until the model answers in
//! text. The loop is the pack's (RFC 0248's unresolved question 2); the host
//! counts each step's requests in its `attempts`, and [`ToolLoop`] sums them
//! into a [`LoopRecord`], charging a [`Budget`] step by step when given one.

use crate::budget::{Budget, BudgetError};
use crate::call::call;
use crate::request::Request;
use crate::response::Response;
use callai_wire::{Attempts, CallError, ToolCall};
use serde::de::DeserializeOwned;
use std::fmt;

/// A tool call's arguments, decoded (the host has checked them against the
/// tool's schema; `T` should describe the same shape).
pub fn arguments_as<T: DeserializeOwned>(call: &ToolCall) -> Result<T, serde_json::Error> {
    serde_json::from_str(&call.arguments)
}

/// What a tool loop spent over all its steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopRecord {
    /// Calls made: one per step.
    pub steps: u32,
    /// Provider requests those calls made (each step's `attempts.count`).
    pub requests: u32,
    /// Output tokens summed over every request that reported usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// False when any request reported no usage (or the host does not
    /// advertise `attempts`): `output_tokens` is then a floor.
    pub usage_complete: bool,
}

impl LoopRecord {
    /// Adds one step's `attempts` (`None`: a host that does not report
    /// them, counted as one request of unknown usage).
    pub fn add(&mut self, attempts: Option<Attempts>) {
        if self.steps == 0 {
            self.usage_complete = true;
        }
        self.steps += 1;
        match attempts {
            Some(a) => {
                self.requests += a.count;
                if let Some(t) = a.output_tokens {
                    self.output_tokens = Some(self.output_tokens.unwrap_or(0) + t);
                }
                self.usage_complete &= a.usage_complete;
            }
            None => {
                self.requests += 1;
                self.usage_complete = false;
            }
        }
    }
}

/// How a tool loop ended without an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopError {
    /// A step's call failed (its requests are in the record).
    Call(CallError, LoopRecord),
    /// The budget refused the next step; nothing was sent for it.
    Budget(BudgetError, LoopRecord),
    /// The model still called tools after `max_steps` steps.
    TooManySteps(LoopRecord),
}

impl LoopError {
    /// What the loop spent before it ended.
    pub fn record(&self) -> LoopRecord {
        match self {
            Self::Call(_, r) | Self::Budget(_, r) | Self::TooManySteps(r) => *r,
        }
    }
}

impl fmt::Display for LoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Call(e, r) => write!(f, "step {} failed: {e}", r.steps),
            Self::Budget(e, r) => write!(f, "step {} refused: {e}", r.steps + 1),
            Self::TooManySteps(r) => {
                write!(f, "the model still called tools after {} steps", r.steps)
            }
        }
    }
}

impl std::error::Error for LoopError {}

/// The loop's answer: the final response, the conversation that led to it,
/// and what every step cost.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopAnswer {
    /// The response that answered in text.
    pub response: Response,
    /// The request with every step's calls and results appended.
    pub conversation: Request,
    /// What all the steps cost.
    pub record: LoopRecord,
}

/// A tool loop over one request.
///
/// ```no_run
/// use callai_sdk::{Request, Tool, ToolLoop, arguments_as};
/// use serde_json::{Value, json};
///
/// let request = Request::new()
///     .user("What is the weather in Oslo?")
///     .tool(Tool::new("weather", json!({"type": "object", "required": ["city"],
///                                       "properties": {"city": {"type": "string"}}})));
/// let answer = ToolLoop::new(request).max_steps(4).run(|call| {
///     let args: Value = arguments_as(call).map_err(|e| e.to_string())?;
///     Ok(format!("sunny in {}", args["city"]))
/// })?;
/// println!("{} ({} requests)", answer.response.content().unwrap_or(""), answer.record.requests);
/// # Ok::<(), callai_sdk::LoopError>(())
/// ```
#[derive(Debug)]
pub struct ToolLoop<'b> {
    request: Request,
    max_steps: u32,
    budget: Option<&'b mut Budget>,
}

impl<'b> ToolLoop<'b> {
    /// A loop over `request` (its tools offered at every step), of at most
    /// 8 steps.
    pub fn new(request: Request) -> Self {
        Self {
            request,
            max_steps: 8,
            budget: None,
        }
    }

    /// At most `n` steps (calls).
    pub fn max_steps(mut self, n: u32) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// Sends every step through `budget`: admitted before it is sent (its
    /// host retries narrowed to the requests left), charged by what it
    /// really cost.
    pub fn budget(mut self, budget: &'b mut Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Runs the loop: each tool call is handed to `run_tool`, whose text
    /// (or, on `Err`, its error as `Error: ...`, for the model to recover
    /// from) goes back as the call's result.
    pub fn run(
        mut self,
        mut run_tool: impl FnMut(&ToolCall) -> Result<String, String>,
    ) -> Result<LoopAnswer, LoopError> {
        let mut record = LoopRecord::default();
        let mut conversation = self.request;
        loop {
            if record.steps == self.max_steps {
                return Err(LoopError::TooManySteps(record));
            }
            let sent = match self.budget.as_deref_mut() {
                Some(budget) => match budget.call(&conversation) {
                    Ok(response) => Ok(response),
                    Err(BudgetError::Call(e)) => Err((Some(e), None)),
                    Err(refused) => Err((None, Some(refused))),
                },
                None => call(&conversation).map_err(|e| (Some(e), None)),
            };
            let response = match sent {
                Ok(response) => response,
                Err((Some(e), _)) => {
                    record.add(Some(failed_attempts(&e)));
                    return Err(LoopError::Call(e, record));
                }
                Err((None, refused)) => {
                    let refused = refused.expect("a refusal when no call error");
                    return Err(LoopError::Budget(refused, record));
                }
            };
            record.add(response.attempts());
            if response.tool_calls().is_empty() {
                return Ok(LoopAnswer {
                    response,
                    conversation,
                    record,
                });
            }
            let calls = response.tool_calls().to_vec();
            let text = response.content().unwrap_or_default().to_owned();
            conversation = conversation.tool_calls(text, calls.clone());
            for call in &calls {
                let result = run_tool(call).unwrap_or_else(|e| format!("Error: {e}"));
                conversation = conversation.tool_result(call.id.clone(), result);
            }
        }
    }
}

/// What a failed call's error says it spent, as `attempts`.
fn failed_attempts(e: &CallError) -> Attempts {
    let (tokens, complete) = match e.output_tokens() {
        Some((t, complete)) => (Some(t), complete),
        None => (None, false),
    };
    Attempts {
        count: e.total_attempts().unwrap_or(0),
        output_tokens: tokens,
        usage_complete: complete,
        structured_output: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempts(count: u32, tokens: Option<u64>, complete: bool) -> Option<Attempts> {
        Some(Attempts {
            count,
            output_tokens: tokens,
            usage_complete: complete,
            structured_output: None,
        })
    }

    #[test]
    fn a_record_sums_every_steps_requests() {
        let mut r = LoopRecord::default();
        r.add(attempts(2, Some(16), true));
        r.add(attempts(1, Some(5), true));
        assert_eq!(
            r,
            LoopRecord {
                steps: 2,
                requests: 3,
                output_tokens: Some(21),
                usage_complete: true
            }
        );
        r.add(attempts(1, None, false));
        assert!(!r.usage_complete);
        r.add(None);
        assert_eq!((r.steps, r.requests, r.output_tokens), (4, 5, Some(21)));
    }
}

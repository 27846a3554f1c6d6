//! A per-node budget charged by what calls really cost: provider requests
//! from `attempts.count`, output tokens from `attempts.outputTokens`
//! (RFC 0248 §A), not by the number of `call`s.

use crate::call::{call, call_accounting};
use crate::request::Request;
use crate::response::Response;
use callai_wire::{Attempts, CallError, MAX_ATTEMPTS};
use std::fmt;

/// What a request that names no `maxTokens` may cost: the host default of
/// the design (`[retry] defaultMaxTokens`), unless told otherwise.
pub const DEFAULT_MAX_TOKENS: u32 = 4000;

/// What a node has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// `call`s made: what a pack that counts calls believes it spent.
    pub calls: u32,
    /// Provider requests those calls made.
    pub requests: u32,
    /// Output tokens reported over those requests.
    pub output_tokens: u64,
    /// True when some request reported no usage: `output_tokens` is a floor.
    pub output_tokens_is_floor: bool,
}

/// A call the budget refused, or a call that failed.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetError {
    /// Making the call could exceed the budget; nothing was sent.
    Exceeded {
        /// Which limit: `maxRequests` or `maxOutputTokens`.
        limit: &'static str,
        /// What the limit allows.
        allowed: u64,
        /// What is already spent against it.
        spent: u64,
        /// What the next call could add at least.
        needed: u64,
    },
    /// The call was made (and charged) and failed.
    Call(CallError),
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exceeded {
                limit,
                allowed,
                spent,
                needed,
            } => write!(
                f,
                "budget {limit} = {allowed} would be exceeded: {spent} spent, the next call needs {needed} more"
            ),
            Self::Call(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BudgetError {}

/// A per-node budget, charged by what calls really cost.
///
/// ```
/// use callai_sdk::{Attempts, Budget, Request};
///
/// let mut budget = Budget::new().max_requests(3).max_output_tokens(5000);
/// let request = Request::new().user("hi").max_tokens(2000);
/// assert!(budget.admit(&request).is_ok());
///
/// // One call whose host truncated once and retried: two requests.
/// budget.charge(Some(Attempts { count: 2, output_tokens: Some(3800),
///                               usage_complete: true, structured_output: None }));
/// assert_eq!(budget.spent().calls, 1);
/// assert_eq!(budget.spent().requests, 2);
/// assert_eq!(budget.remaining_requests(), Some(1));
/// // 3800 spent + up to 2000 more would pass 5000: refused before sending.
/// assert!(budget.admit(&request).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    max_requests: Option<u32>,
    max_output_tokens: Option<u64>,
    default_max_tokens: u32,
    spent: Spent,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_requests: None,
            max_output_tokens: None,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            spent: Spent::default(),
        }
    }
}

impl Budget {
    /// No limits yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` provider requests for the node: what the provider
    /// receives, retries and fallbacks included, not the calls made.
    pub fn max_requests(mut self, n: u32) -> Self {
        self.max_requests = Some(n);
        self
    }

    /// What a request without `max_tokens` is taken to cost (default
    /// 4000, the host's own default); set it to
    /// your host's `[retry] defaultMaxTokens` if it differs.
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.default_max_tokens = n;
        self
    }

    /// At most `n` output tokens for the node.
    pub fn max_output_tokens(mut self, n: u64) -> Self {
        self.max_output_tokens = Some(n);
        self
    }

    /// What has been spent.
    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// Provider requests left, if limited.
    pub fn remaining_requests(&self) -> Option<u32> {
        self.max_requests
            .map(|m| m.saturating_sub(self.spent.requests))
    }

    /// Whether `request` may be sent: one more request and its `max_tokens`
    /// must fit. (A host that retries may spend more; [`Budget::call`] caps
    /// that with `retry.maxAttempts` when the host honours it.)
    pub fn admit(&self, request: &Request) -> Result<(), BudgetError> {
        if let Some(max) = self.max_requests
            && self.spent.requests >= max
        {
            return Err(BudgetError::Exceeded {
                limit: "maxRequests",
                allowed: max.into(),
                spent: self.spent.requests.into(),
                needed: 1,
            });
        }
        if let Some(max) = self.max_output_tokens {
            let needed = u64::from(
                request
                    .requested_max_tokens()
                    .unwrap_or(self.default_max_tokens),
            );
            if self.spent.output_tokens + needed > max {
                return Err(BudgetError::Exceeded {
                    limit: "maxOutputTokens",
                    allowed: max,
                    spent: self.spent.output_tokens,
                    needed,
                });
            }
        }
        Ok(())
    }

    /// Charges one call by its `attempts`; `None` (a host that does not
    /// advertise `attempts`) charges one request and marks tokens a floor.
    pub fn charge(&mut self, attempts: Option<Attempts>) {
        self.spent.calls += 1;
        match attempts {
            Some(a) => {
                self.spent.requests += a.count;
                self.spent.output_tokens += a.output_tokens.unwrap_or(0);
                self.spent.output_tokens_is_floor |= !a.usage_complete;
            }
            None => {
                self.spent.requests += 1;
                self.spent.output_tokens_is_floor = true;
            }
        }
    }

    /// Charges a failed call: the requests the host made before giving up,
    /// and the tokens it reported (at least one request when it says nothing).
    pub fn charge_error(&mut self, error: &CallError) {
        self.spent.calls += 1;
        // A refusal before any request (validation, policy) costs nothing.
        let requests = error.total_attempts().unwrap_or(0);
        self.spent.requests += requests;
        match error.output_tokens() {
            Some((tokens, complete)) => {
                self.spent.output_tokens += tokens;
                self.spent.output_tokens_is_floor |= !complete;
            }
            None => self.spent.output_tokens_is_floor |= requests > 0,
        }
    }

    /// Admits, sends and charges one call. When the host honours
    /// `retry`, the call's `maxAttempts` is narrowed to the requests left,
    /// so host retries cannot overrun the budget.
    pub fn call(&mut self, request: &Request) -> Result<Response, BudgetError> {
        self.admit(request)?;
        let mut request = request.clone();
        if let Some(left) = self.remaining_requests()
            && call_accounting().retry_policy
        {
            let retry = request.requested_retry().unwrap_or_default();
            let cap = retry.attempt_cap().map_or(left, |n| n.min(left));
            let narrowed = retry
                .max_attempts(cap.clamp(1, MAX_ATTEMPTS))
                .expect("clamped into range");
            request = request.retry(narrowed);
        }
        match call(&request) {
            Ok(response) => {
                self.charge(response.attempts());
                Ok(response)
            }
            Err(e) => {
                self.charge_error(&e);
                Err(BudgetError::Call(e))
            }
        }
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
    fn charges_requests_not_calls() {
        let mut b = Budget::new().max_requests(4);
        b.charge(attempts(3, Some(100), true));
        assert_eq!(
            b.spent(),
            Spent {
                calls: 1,
                requests: 3,
                output_tokens: 100,
                output_tokens_is_floor: false
            }
        );
        assert_eq!(b.remaining_requests(), Some(1));
        b.charge(attempts(1, Some(5), true));
        let refused = b.admit(&Request::new().user("x")).unwrap_err();
        assert!(refused.to_string().contains("maxRequests = 4"), "{refused}");
    }

    #[test]
    fn incomplete_usage_makes_a_floor() {
        let mut b = Budget::new();
        b.charge(attempts(2, Some(50), false));
        assert!(b.spent().output_tokens_is_floor);
        let mut b = Budget::new();
        b.charge(None);
        assert_eq!(
            (b.spent().requests, b.spent().output_tokens_is_floor),
            (1, true)
        );
    }

    #[test]
    fn a_failed_call_is_charged_what_the_host_reports() {
        let mut details = serde_json::Map::new();
        details.insert("totalAttempts".into(), 2.into());
        details.insert("outputTokens".into(), 4000.into());
        details.insert("usageComplete".into(), true.into());
        let e = CallError {
            code: callai_wire::ErrorCode::EnvelopeInvalid,
            message: "m".into(),
            details: Some(details),
        };
        let mut b = Budget::new();
        b.charge_error(&e);
        assert_eq!(
            b.spent(),
            Spent {
                calls: 1,
                requests: 2,
                output_tokens: 4000,
                output_tokens_is_floor: false
            }
        );
        let refused = CallError::new(callai_wire::ErrorCode::ValidationError, "m");
        b.charge_error(&refused);
        assert_eq!(
            b.spent().requests,
            2,
            "a refusal before any request costs nothing"
        );
    }

    #[test]
    fn the_token_limit_admits_only_what_fits() {
        let mut b = Budget::new().max_output_tokens(1000);
        b.charge(attempts(1, Some(600), true));
        assert!(b.admit(&Request::new().user("x").max_tokens(400)).is_ok());
        assert!(b.admit(&Request::new().user("x").max_tokens(401)).is_err());
    }

    #[test]
    fn a_request_without_max_tokens_costs_the_host_default() {
        let b = Budget::new().max_output_tokens(3999);
        assert!(
            b.admit(&Request::new().user("x")).is_err(),
            "4000 is taken, not 1"
        );
        let small = Budget::new()
            .max_output_tokens(3999)
            .default_max_tokens(500);
        assert!(small.admit(&Request::new().user("x")).is_ok());
    }
}

//! `bookai.scene.draft`: the Book AI pack RFC 0248 was written for.
//!
//! It shows the author an estimate before the run, enforces a per-node
//! budget (`maxCalls`, charged by `attempts.count`; `maxOutputTokens`,
//! charged by `attempts.outputTokens`), validates every reply closed-world
//! itself and does one error-fed repair. When the host advertises
//! `retryPolicy`, its own loop runs with host retries off
//! (`retry: {maxAttempts: 1, growMaxTokens: false}`) and it re-asks a
//! truncated draft itself with a doubled budget; otherwise the host retries
//! and the budget counts what `attempts` reports.
//!
//! Input: `{"premise", "maxCalls"?: 4, "maxOutputTokens"?: 12000,
//! "maxTokens"?: 1500, "hostRetries"?: false}`.
//! Output: `{"scene", "hostRetries", "estimate", "spent"}`.

mod scene;

use callai_sdk::{
    Budget, BudgetError, ErrorCode, Node, NodeError, Request, Retry, Spent, call_accounting, log,
};
use serde::Deserialize;
use serde_json::{Value, json};

struct BookAiScene;

/// The node's input.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Input {
    premise: String,
    /// Provider requests the node may cause (charged by `attempts.count`).
    #[serde(default = "default_max_calls")]
    max_calls: u32,
    #[serde(default = "default_max_output_tokens")]
    max_output_tokens: u64,
    #[serde(default = "default_max_tokens")]
    max_tokens: u32,
    #[serde(default)]
    host_retries: bool,
}

fn default_max_calls() -> u32 {
    4
}

fn default_max_output_tokens() -> u64 {
    12000
}

fn default_max_tokens() -> u32 {
    1500
}

struct Settings {
    premise: String,
    max_calls: u32,
    max_output_tokens: u64,
    max_tokens: u32,
    own_loop: bool,
    retry_policy: bool,
}

impl Settings {
    fn new(input: Input) -> Self {
        let flags = call_accounting();
        Self {
            premise: input.premise,
            max_calls: input.max_calls,
            max_output_tokens: input.max_output_tokens,
            max_tokens: input.max_tokens,
            // Host retries can only be turned off where the host honours `retry`.
            own_loop: !input.host_retries && flags.retry_policy,
            retry_policy: flags.retry_policy,
        }
    }

    /// What the author is shown before the run: the worst case of the plan.
    fn estimate(&self) -> Value {
        let m = u64::from(self.max_tokens);
        if self.own_loop {
            // Draft, one re-ask of a truncated draft at 2x, one repair: one request each.
            json!({"calls": 3, "requests": 3, "outputTokens": m + 2 * m + m,
                   "basis": "host retries off: each call is exactly one request"})
        } else if self.retry_policy {
            json!({"calls": 2, "requests": self.max_calls, "outputTokens": null,
                   "basis": "host retries on, each call capped by retry.maxAttempts at the requests left; budgets may grow"})
        } else {
            json!({"calls": 2, "requests": null, "outputTokens": null,
                   "basis": "the host does not advertise retryPolicy: it may retry every call; spend is counted from attempts"})
        }
    }

    fn request(&self, max_tokens: u32) -> Request {
        let request = Request::new()
            .system("You draft one scene of a novel. Reply with JSON only: title, scene, characters (names), mood (calm, tense, joyful or melancholy).")
            .user(format!("Premise: {}", self.premise))
            .max_tokens(max_tokens)
            .schema(scene::schema());
        if self.own_loop {
            request.retry(Retry::off())
        } else {
            request
        }
    }
}

fn spent_json(s: Spent) -> Value {
    json!({"calls": s.calls, "requests": s.requests, "outputTokens": s.output_tokens,
           "outputTokensIsFloor": s.output_tokens_is_floor})
}

/// Why the node stopped, with what it estimated and spent.
fn failure(settings: &Settings, budget: &Budget, reason: String) -> NodeError {
    NodeError::new(json!({"error": reason, "estimate": settings.estimate(), "spent": spent_json(budget.spent())}).to_string())
}

impl Node for BookAiScene {
    type Input = Input;
    type Output = Value;

    fn run(input: Input) -> Result<Value, NodeError> {
        let settings = Settings::new(input);
        let mut budget = Budget::new()
            .max_requests(settings.max_calls)
            .max_output_tokens(settings.max_output_tokens);
        log::info(&format!("estimate before the run: {}", settings.estimate()));

        // The draft; in the pack's own loop, a truncated draft is asked again
        // once with a doubled budget.
        let mut draft = budget.call(&settings.request(settings.max_tokens));
        if settings.own_loop
            && let Err(BudgetError::Call(e)) = &draft
            && e.code == ErrorCode::EnvelopeTruncationUnrecoverable
        {
            log::info("the draft was truncated: asking again with twice the budget");
            draft = budget.call(&settings.request(settings.max_tokens.saturating_mul(2)));
        }
        // Its own closed-world check; one repair, fed with the error.
        let complaint = match &draft {
            Ok(r) => match r.data() {
                Some(data) => scene::validate(data).err().map(|c| (c, data.to_string())),
                None => Some(("the reply carried no data".into(), String::new())),
            },
            Err(BudgetError::Call(e)) if e.code == ErrorCode::EnvelopeInvalid => {
                Some((e.message.clone(), String::new()))
            }
            Err(e) => return Err(failure(&settings, &budget, e.to_string())),
        };
        let scene = match complaint {
            None => draft
                .ok()
                .and_then(|r| r.data().cloned())
                .unwrap_or_default(),
            Some((complaint, previous)) => {
                log::warn(&format!("the draft failed validation: {complaint}"));
                let mut repair = settings.request(settings.max_tokens);
                if !previous.is_empty() {
                    repair = repair.assistant(previous);
                }
                let repair = repair.user(format!(
                    "That scene is not valid: {complaint}. Reply with a corrected scene, JSON only."
                ));
                let repaired = budget
                    .call(&repair)
                    .map_err(|e| failure(&settings, &budget, e.to_string()))?;
                let data = repaired.data().cloned().unwrap_or_default();
                scene::validate(&data).map_err(|c| {
                    failure(
                        &settings,
                        &budget,
                        format!("the repair failed validation too: {c}"),
                    )
                })?;
                data
            }
        };
        Ok(json!({
            "scene": scene,
            "hostRetries": if settings.own_loop { "off" } else { "on" },
            "estimate": settings.estimate(),
            "spent": spent_json(budget.spent()),
        }))
    }
}

callai_sdk::export_node!(BookAiScene);

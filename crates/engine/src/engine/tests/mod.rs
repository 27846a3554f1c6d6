//! The engine against RFC 0248 §A and §B, row by row, with a scripted mock:
//! the harness here, the rows in `accounting` (§A) and `policy` (§B).

mod accounting;
mod policy;

use crate::Host;
use crate::config::HostConfig;
use crate::events::{Event, EventLog};
use crate::mock::{MockLogEntry, MockProvider, MockScript};
use callai_wire::{CallError, CallResult};
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) struct Run {
    pub outcome: Result<CallResult, CallError>,
    pub events: Vec<Event>,
    pub mock_log: Vec<MockLogEntry>,
}

impl Run {
    pub(crate) fn ok(&self) -> &CallResult {
        self.outcome.as_ref().expect("the call should succeed")
    }

    pub(crate) fn err(&self) -> &CallError {
        self.outcome.as_ref().expect_err("the call should fail")
    }

    pub(crate) fn named(&self, name: &str) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e.type_name() == name)
            .map(|e| e.to_json()["payload"].clone())
            .collect()
    }

    pub(super) fn exhausted_total(&self) -> u32 {
        let ex = self.named("envelope.retry.exhausted");
        assert_eq!(ex.len(), 1, "one exhausted event: {:?}", self.events);
        ex[0]["totalAttempts"].as_u64().unwrap() as u32
    }
}

pub(crate) fn run_with(config: HostConfig, script: Value, request: Value) -> Run {
    let script = MockScript::from_json(&script.to_string()).unwrap();
    let mock = Arc::new(MockProvider::new(script, config.mock.structured_output()));
    let host = Host::builder(config)
        .build()
        .unwrap()
        .with_provider("mock", mock.clone());
    let events = EventLog::new();
    // Paused time: backoff waits pass at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let outcome = rt.block_on(host.call_json("test.node", &request.to_string(), &events));
    Run {
        outcome,
        events: events.take(),
        mock_log: mock.log(),
    }
}

pub(super) fn run(script: Value, request: Value) -> Run {
    run_with(HostConfig::default(), script, request)
}

pub(super) fn structured(extra: Value) -> Value {
    let mut r = json!({
        "messages": [{"role": "user", "content": "Write a scene."}],
        "responseSchema": {"type": "object", "required": ["scene"],
                            "properties": {"scene": {"type": "string"}}}
    });
    r.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    r
}

pub(super) fn reply(content: &str, finish: &str, tokens: u32) -> Value {
    json!({"content": content, "finishReason": finish, "outputTokens": tokens})
}

pub(super) const OK: &str = r#"{"scene": "ok"}"#;
pub(super) const CUT: &str = r#"{"scene": "it was a dark"#;
pub(super) const PROSE: &str = "Once upon a time, in prose.";
pub(super) const WRONG: &str = r#"{"title": "no scene"}"#;

pub(super) fn config(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut c = HostConfig::default();
    edit(&mut c);
    c
}

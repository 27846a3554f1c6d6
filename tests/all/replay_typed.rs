//! Replay through the typed entry, with the run log behind its trait.

use callai_engine::{HostConfig, Journal, Recording, RunLog};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::{block_on, pack, run_journaled};
use serde_json::json;
use std::sync::Arc;

#[test]
fn the_typed_entry_replays_its_attempts_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).unwrap());
    let typed = pack("typed_call");
    let input = json!({"prompt": "p", "maxTokens": 100, "schema": {"type": "object"}}).to_string();
    let script = json!([{"content": "{", "finishReason": "length", "outputTokens": 500},
                        {"content": "nope"},
                        {"content": "{\"ok\": true}", "outputTokens": 7}]);
    let journal = block_on(Journal::record(
        log.clone(),
        "t",
        "test.node",
        Recording::default(),
    ))
    .unwrap();
    let recorded = run_journaled(&typed, HostConfig::default(), &script, &input, journal);
    assert_eq!(
        recorded.ok()["result"]["attempts"],
        json!({"count": 3, "outputTokens": 107, "usageComplete": false, "structuredOutput": "native"})
    );

    let journal = block_on(Journal::replay(log.as_ref(), "t")).unwrap();
    let replayed = run_journaled(&typed, HostConfig::default(), &json!([]), &input, journal);
    assert_eq!(replayed.ok(), recorded.ok());
    assert!(replayed.mock_log.is_empty());
    assert_eq!(replayed.events, recorded.events);

    // The same node asking through the typed entry with another budget diverges.
    let other = json!({"prompt": "p", "maxTokens": 101, "schema": {"type": "object"}}).to_string();
    let journal = block_on(Journal::replay(log.as_ref(), "t")).unwrap();
    let diverged = run_journaled(&typed, HostConfig::default(), &json!([]), &other, journal);
    assert!(matches!(
        diverged.output,
        Err(callai_engine::RunError::ReplayDiverged(_))
    ));
    assert_eq!(diverged.events_named("replay.diverged").len(), 1);
}

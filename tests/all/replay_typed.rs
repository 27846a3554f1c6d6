//! Replay through the typed entry, with the run log behind its trait.

use callai_engine::events::EventLog;
use callai_engine::wire::StructuredOutput;
use callai_engine::{
    CallInput, Host, HostConfig, Journal, MockProvider, MockScript, Recording, RunLog, RunSession,
};
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

#[test]
fn a_recorded_session_keeps_its_events_even_when_given_a_discarding_log() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).unwrap());
    let host = Host::builder(HostConfig::default())
        .mock(MockProvider::new(
            MockScript::replies([("hello", 2)]),
            StructuredOutput::Native,
        ))
        .build()
        .unwrap();
    let request = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    block_on(async {
        let journal = Journal::record(log.clone(), "r1", "n", Recording::default())
            .await
            .unwrap();
        let mut session =
            RunSession::new(host.clone(), "n", journal).with_events(EventLog::discarding());
        let live = session
            .call(CallInput::Json(request.clone()))
            .await
            .unwrap();
        let (finished, events) = session.finish(Ok("done".into())).await;
        finished.unwrap();
        assert!(
            events.iter().any(|e| e.type_name() == "provider.usage"),
            "{events:?}"
        );
        let run = log.load("r1".into()).await.unwrap();
        let recorded: Vec<_> = run.calls[0].events.iter().map(|e| e.type_name()).collect();
        assert_eq!(recorded, ["provider.usage"]);
        // Replayed, the call and its events are the recorded ones.
        let journal = Journal::replay(log.as_ref(), "r1").await.unwrap();
        let mut replay = RunSession::new(host, "n", journal).with_events(EventLog::discarding());
        let again = replay.call(CallInput::Json(request)).await.unwrap();
        assert_eq!(again, live);
        assert_eq!(replay.events().len(), 1);
    });
}

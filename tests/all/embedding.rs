//! What an embedder does with the public API: its own linker and store with
//! `add_to_linker`, its own providers under names of its choosing.

use callai_engine::wire::CallRequest;
use callai_engine::{
    EventLog, Host, HostConfig, Journal, MockProvider, MockScript, Recording, RunLog,
};
use callai_host::{CallAiCtx, CallAiView, add_to_linker};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::block_on;
use serde_json::json;
use std::sync::Arc;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    callai: CallAiCtx,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Runs the echo-attempts pack on a bare wasmtime engine of the embedder's,
/// with `journal`, and finishes the run through the context.
async fn run_embedded(host: Host, journal: Journal, input: &str) -> Result<String, String> {
    let engine = Engine::new(Config::new().wasm_component_model(true)).unwrap();
    let component = Component::new(
        &engine,
        callai_examples::example("echo-attempts")
            .unwrap()
            .component(),
    )
    .unwrap();
    let mut linker: Linker<State> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    add_to_linker(&mut linker, |s: &mut State| CallAiView {
        ctx: &mut s.callai,
    })
    .unwrap();
    let state = State {
        wasi: WasiCtx::builder().build(),
        table: ResourceTable::new(),
        callai: CallAiCtx::new(host, "embedded.node", journal),
    };
    let mut store = Store::new(&engine, state);
    let instance = linker
        .instantiate_async(&mut store, &component)
        .await
        .unwrap();
    let run = instance
        .get_typed_func::<(&str,), (Result<String, String>,)>(&mut store, "run")
        .unwrap();
    let (result,) = run.call_async(&mut store, (input,)).await.unwrap();
    let result = result.map_err(callai_engine::RunError::Node);
    let (result, _events) = store.data_mut().callai.finish(result).await;
    result.map_err(|e| e.to_string())
}

#[test]
fn an_embedder_with_its_own_linker_records_and_finishes_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).unwrap());
    let mock = MockProvider::new(
        MockScript::replies([("embedded", 4)]),
        callai_engine::wire::StructuredOutput::Native,
    );
    let host = Host::builder(HostConfig::default())
        .mock(mock)
        .build()
        .unwrap();
    let input = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    block_on(async {
        let journal = Journal::record(log.clone(), "e1", "embedded.node", Recording::default())
            .await
            .unwrap();
        let out = run_embedded(host.clone(), journal, input).await.unwrap();
        assert!(out.contains("embedded"), "{out}");
        let run = log.load("e1".into()).await.unwrap();
        assert_eq!(
            run.status,
            callai_engine::runlog::RunStatus::Ok,
            "the run was finished"
        );
        assert_eq!(run.output.as_deref(), Some(out.as_str()));
        assert_eq!(run.calls.len(), 1);
        // And it replays, with the request's keys in another order.
        let reordered = r#"{"messages": [{"content": "hi", "role": "user"}]}"#;
        let journal = Journal::replay(log.as_ref(), "e1").await.unwrap();
        let nothing = host.with_provider(
            "mock",
            Arc::new(MockProvider::new(
                MockScript::default(),
                callai_engine::wire::StructuredOutput::Native,
            )),
        );
        let again = run_embedded(nothing, journal, reordered).await.unwrap();
        assert_eq!(again, out);
    });
}

#[test]
fn an_embedders_provider_is_routed_to_by_name_and_policed_like_a_configured_one() {
    let mine = Arc::new(MockProvider::new(
        MockScript::replies([("from mine", 2)]),
        callai_engine::wire::StructuredOutput::Native,
    ));
    let config = HostConfig::from_toml("[defaults]\nprovider = \"mine\"\n").unwrap();
    let host = Host::builder(config)
        .provider("mine", mine.clone())
        .build()
        .unwrap();
    assert_eq!(host.allowed_providers(), ["mine", "mock"]);
    let facet = callai_engine::facet::ai_providers(&host);
    assert_eq!(facet["providers"], json!(["mine", "mock"]));
    let request = CallRequest::from_value(
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
        callai_engine::wire::RetryField::Honoured,
    )
    .unwrap();
    let events = EventLog::new();
    let result = block_on(host.call("n", &request, &events)).unwrap();
    assert_eq!(result.content.as_deref(), Some("from mine"));
    assert_eq!(mine.log().len(), 1);
    let usage = events.snapshot()[0].to_json();
    assert_eq!(usage["payload"]["provider"], "mine");

    // Left out by the policy: refused before any request.
    let config = HostConfig::from_toml("[policy]\nallowedProviders = [\"mock\"]\n").unwrap();
    let host = Host::builder(config)
        .provider("mine", mine.clone())
        .build()
        .unwrap();
    let request = CallRequest::from_value(
        &json!({"provider": "mine", "messages": [{"role": "user", "content": "hi"}]}),
        callai_engine::wire::RetryField::Honoured,
    )
    .unwrap();
    let err = block_on(host.call("n", &request, &EventLog::new())).unwrap_err();
    assert_eq!(err.code, callai_engine::wire::ErrorCode::PolicyDenied);
    assert_eq!(mine.log().len(), 1, "nothing more was sent");

    // A default or a policy naming a provider the host lacks is refused at build time.
    let config = HostConfig::from_toml("[defaults]\nprovider = \"absent\"\n").unwrap();
    let err = Host::builder(config).build().unwrap_err();
    assert_eq!(err.key(), Some("defaults.provider"));
    let config =
        HostConfig::from_toml("[policy]\nallowedProviders = [\"mock\", \"absent\"]\n").unwrap();
    let err = Host::builder(config).build().unwrap_err();
    assert_eq!(err.key(), Some("policy.allowedProviders[1]"));
}

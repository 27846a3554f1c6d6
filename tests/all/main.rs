//! The integration tests: one test binary (as wasmtime's `tests/all`), one
//! module per area, so that wasmtime and the host are linked once. The
//! shared helpers are the `callai-tests` library beside this folder; the
//! `callai` binary these tests run is the one this package builds.

/// The `callai` this package builds, with the tests' compiled-component
/// cache (`callai_tests::cache_dir`).
fn callai_command() -> std::process::Command {
    callai_tests::callai_command(env!("CARGO_BIN_EXE_callai"))
}

mod bookai;
mod bookai_research;
mod cache;
mod cli;
mod cli_new;
mod cli_operators;
mod cli_replay;
mod cli_resume;
mod cli_serve;
mod clients;
mod clients_tools;
mod code_size;
mod concurrency;
mod conformance;
mod deploy;
mod echo_attempts;
mod embedding;
mod embedding_example;
mod engine_properties;
mod facet;
mod fault_matrix;
mod fuzz_inputs;
mod hostile;
mod languages;
mod layering;
mod limits;
mod provider_faults;
mod providers;
mod readme_pack;
mod replay_typed;
mod runlog;
mod runlog_api_keys;
mod runlog_growth;
mod runlog_ledger;
mod runlog_migration;
mod runlog_responses;
mod runlog_traces;
mod sandbox;
mod sdk_declarations;
mod sdk_images;
mod security_review;
mod serve_api;
mod serve_audit;
mod serve_bedrock;
mod serve_bill;
mod serve_budget;
mod serve_budget_contention;
mod serve_budget_hosts;
mod serve_budget_money;
mod serve_calls;
mod serve_calls_logged;
mod serve_connections;
mod serve_cost;
mod serve_dropin;
mod serve_durable;
mod serve_embeddings;
mod serve_errors;
mod serve_fidelity;
mod serve_gemini;
mod serve_guard;
mod serve_idempotency;
mod serve_images;
mod serve_keys;
mod serve_limits;
mod serve_load;
mod serve_log;
mod serve_names;
mod serve_ownership;
mod serve_packs;
mod serve_prompt_cache;
mod serve_quotas;
mod serve_response_cache;
mod serve_responses;
mod serve_responses_mapping;
mod serve_responses_stored;
mod serve_routes;
mod serve_slow_clients;
mod serve_sre;
mod serve_stream;
mod serve_thinking;
mod serve_tools;
mod serve_upstream;
mod serve_upstream_responses;
mod serve_vertex;
mod telemetry;
mod ui_browser;
mod ui_call_attempts;
mod ui_calls_list;
mod ui_guard;
mod ui_keys;
mod upstream_pool;

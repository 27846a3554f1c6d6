//! A host of your own: the README's embedding example, built and run by the
//! tests (`tests/all/embedding_example.rs`). `main.rs` prints what
//! [`run_pack`] returns.

use callai_engine::{Host, HostConfig, MockProvider, MockScript};
use callai_host::{PackRuntime, RunOutput};

/// Runs the `echo-attempts` pack once, on a mock whose first reply is
/// truncated: the pack's output carries `attempts.count` 2.
pub async fn run_pack() -> Result<RunOutput, Box<dyn std::error::Error>> {
    // README: begin
    let config = HostConfig::from_toml("[retry]\nmaxRetryAttempts = 4\n")?;
    let script = MockScript::from_json(
        r#"[{"content": "{\"scene\": \"cut", "finishReason": "length", "outputTokens": 5000},
            {"content": "{\"scene\": \"ok\"}", "outputTokens": 1800}]"#,
    )?;
    let mock = MockProvider::new(script, config.mock.structured_output());
    let host = Host::builder(config).mock(mock).build()?;

    let runtime = PackRuntime::new()?; // one per process
    let component = callai_examples::example("echo-attempts")
        .expect("bundled")
        .component();
    let pack = runtime.load(&component)?; // compiled once, pre-instantiated
    let input = r#"{"messages": [{"role": "user", "content": "A scene."}], "maxTokens": 2000,
                    "responseSchema": {"type": "object", "required": ["scene"]}}"#;
    let out = pack.run(&host, "my.node", input).await;
    // README: end
    Ok(out)
}

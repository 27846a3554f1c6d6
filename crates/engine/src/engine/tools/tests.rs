//! Tool calls through the engine, with a scripted mock: each unusable call
//! is a schema violation retried with corrective text, a cut call a
//! truncation retried with a grown budget, a refusal never retried; every
//! request counted.

use crate::config::HostConfig;
use crate::engine::tests::run_with;
use callai_wire::{ErrorCode, FinishReason, StructuredOutput};
use serde_json::{Value, json};

fn request(choice: Value) -> Value {
    let mut r = json!({
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "maxTokens": 100,
        "tools": [
            {"name": "weather", "description": "The weather in a city",
             "parameters": {"type": "object", "required": ["city"],
                            "properties": {"city": {"type": "string"}},
                            "additionalProperties": false}},
            {"name": "time", "parameters": {"type": "object"}}
        ]
    });
    if !choice.is_null() {
        r["toolChoice"] = choice;
    }
    r
}

fn call(name: &str, arguments: Value, tokens: u32) -> Value {
    json!({"toolCalls": [{"id": "c1", "name": name, "arguments": arguments}],
           "outputTokens": tokens})
}

fn run(script: Value, request: Value) -> crate::engine::tests::Run {
    run_with(HostConfig::default(), script, request)
}

#[test]
fn a_malformed_call_then_a_valid_one_is_two_requests_counted() {
    let r = run(
        json!([
            call("weather", json!("{\"city\": "), 7),
            call("weather", json!({"city": "Oslo"}), 9)
        ]),
        request(Value::Null),
    );
    let result = r.ok();
    let calls = result.tool_calls.as_ref().expect("tool calls");
    assert_eq!(calls[0].name, "weather");
    assert_eq!(calls[0].arguments, r#"{"city":"Oslo"}"#);
    assert_eq!(result.finish_reason, Some(FinishReason::ToolCall));
    assert_eq!(result.content, None);
    let attempts = result.attempts.unwrap();
    assert_eq!((attempts.count, attempts.output_tokens), (2, Some(16)));
    // auto: not a forced call, so not structured output.
    assert_eq!(attempts.structured_output, None);
    let retried = r.named("envelope.retry.attempted");
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0]["reason"], "schema-violation");
    let said = retried[0]["previousError"].as_str().unwrap();
    assert!(
        said.contains("tool `weather`") && said.contains("not JSON"),
        "{said}"
    );
    // The retry carried one more message: the corrective text.
    assert_eq!(r.mock_log[1].messages, r.mock_log[0].messages + 1);
}

#[test]
fn arguments_against_the_schema_and_unknown_tools_are_violations() {
    let r = run(
        json!([
            call("weather", json!({"town": "Oslo"}), 5),
            call("forecast", json!({}), 5),
            call("weather", json!({"city": "Oslo"}), 5)
        ]),
        request(Value::Null),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 3);
    let retried = r.named("envelope.retry.attempted");
    let first = retried[0]["previousError"].as_str().unwrap();
    assert!(
        first.contains("tool `weather`") && first.contains("city"),
        "{first}"
    );
    // The reply's own values are never quoted.
    assert!(
        !first.contains("Oslo") && !first.contains("town"),
        "{first}"
    );
    let second = retried[1]["previousError"].as_str().unwrap();
    assert!(
        second.contains("not offered") && second.contains("weather, time"),
        "{second}"
    );
}

#[test]
fn a_forced_call_answered_in_text_is_retried_and_says_no_structured_output() {
    let r = run(
        json!([{"content": "It is sunny.", "outputTokens": 4},
               call("weather", json!({"city": "Oslo"}), 6)]),
        request(json!("weather")),
    );
    let attempts = r.ok().attempts.unwrap();
    assert_eq!(attempts.count, 2);
    // No responseSchema: no structuredOutput (RFC 0248 §A's type).
    assert_eq!(attempts.structured_output, None);
    let said = r.named("envelope.retry.attempted")[0]["previousError"].clone();
    assert!(
        said.as_str()
            .unwrap()
            .contains("requires a call of tool `weather`")
    );
    // A call of another tool when one is named is a violation too.
    let r = run(
        json!([
            call("time", json!({}), 1),
            call("weather", json!({"city": "x"}), 1)
        ]),
        request(json!("weather")),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 2);
}

#[test]
fn text_under_auto_is_an_answer() {
    let r = run(
        json!([{"content": "Which city?", "outputTokens": 3}]),
        request(Value::Null),
    );
    let result = r.ok();
    assert_eq!(result.content.as_deref(), Some("Which city?"));
    assert_eq!(result.tool_calls, None);
    assert_eq!(result.finish_reason, Some(FinishReason::Stop));
}

#[test]
fn a_cut_call_is_a_truncation_retried_with_a_grown_budget() {
    let r = run(
        json!([{"toolCalls": [{"name": "weather", "arguments": "{\"ci"}],
                "finishReason": "length", "outputTokens": 100},
               call("weather", json!({"city": "Oslo"}), 20)]),
        request(Value::Null),
    );
    assert_eq!(r.ok().attempts.unwrap().output_tokens, Some(120));
    assert_eq!(r.mock_log[0].max_tokens, 100);
    assert_eq!(r.mock_log[1].max_tokens, 200);
    assert_eq!(r.named("envelope.truncated").len(), 1);
}

#[test]
fn a_refusal_is_never_retried() {
    let r = run(
        json!([{"content": "No.", "finishReason": "refusal", "outputTokens": 1},
               call("weather", json!({"city": "Oslo"}), 1)]),
        request(json!("required")),
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeRefusal);
    assert_eq!(r.mock_log.len(), 1);
}

#[test]
fn the_calls_retry_narrows_tool_retries_too() {
    let mut req = request(Value::Null);
    req["retry"] = json!({"maxAttempts": 1});
    let r = run(json!([call("weather", json!({}), 2)]), req);
    let e = r.err();
    assert_eq!(e.code, ErrorCode::EnvelopeInvalid);
    assert_eq!(e.total_attempts(), Some(1));
}

#[test]
fn one_call_at_a_time_when_parallel_calls_are_off() {
    let mut req = request(Value::Null);
    req["parallelToolCalls"] = json!(false);
    let two = json!({"toolCalls": [{"name": "time", "arguments": {}},
                                    {"name": "weather", "arguments": {"city": "x"}}]});
    let r = run(json!([two, call("time", json!({}), 1)]), req);
    assert_eq!(r.ok().attempts.unwrap().count, 2);
}

#[test]
fn a_tool_schema_is_compiled_under_the_cost_gate_and_named() {
    let mut req = request(Value::Null);
    req["tools"][1]["parameters"] = json!({"type": 12});
    let r = run(json!([]), req);
    assert_eq!(r.err().field(), Some("tools[1].parameters"));
    assert!(r.mock_log.is_empty());
}

#[test]
fn a_host_without_tool_calls_refuses_them_naming_tools() {
    let mut config = HostConfig::default();
    config.policy.tool_calls = false;
    let r = run_with(config, json!([]), request(Value::Null));
    assert_eq!(r.err().field(), Some("tools"));
}

#[test]
fn the_conversation_carries_calls_and_results() {
    let mut req = request(Value::Null);
    req["messages"] = json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "toolCalls": [{"id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"}]},
        {"role": "tool", "toolCallId": "c1", "content": "sunny"}
    ]);
    let r = run(
        json!([{"content": "Sunny in Oslo.", "outputTokens": 4}]),
        req,
    );
    assert_eq!(r.ok().content.as_deref(), Some("Sunny in Oslo."));
    assert_eq!(r.mock_log[0].messages, 3);
}

#[test]
fn the_unscripted_mock_calls_the_forced_tool_validly() {
    let mock = crate::MockProvider::unscripted(StructuredOutput::Native);
    let host = crate::Host::builder(HostConfig::default())
        .build()
        .unwrap()
        .with_provider("mock", std::sync::Arc::new(mock));
    let events = crate::EventLog::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let req = request(json!("weather")).to_string();
    let result = rt
        .block_on(host.call_json("n", &req, &events))
        .expect("the mock answers a forced call");
    let calls = result.tool_calls.unwrap();
    assert_eq!(calls[0].name, "weather");
    let args: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
}

#[test]
fn tool_calls_sharing_an_id_get_one_each_the_first_keeping_its_own() {
    use callai_wire::ToolCall;
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "a".into(),
        arguments: "{}".into(),
    };
    let ids: Vec<String> = super::unique_ids(vec![
        call("call_1"),
        call("call_1"),
        call("call_1_2"),
        call(""),
        call("call_1"),
    ])
    .into_iter()
    .map(|c| c.id)
    .collect();
    assert_eq!(
        ids,
        ["call_1", "call_1_2", "call_1_2_2", "call_4", "call_1_3"]
    );
}

/// Issue 51, item 15: a tool the model called but was not offered is never
/// named back, however much its name looks like a tool's: what it carries
/// is the model's text (here what it was told of a card), and the offered
/// tools are named instead.
#[test]
fn a_call_of_a_tool_not_offered_is_answered_with_the_offered_ones_never_its_name() {
    let leaked = "card_4111111111111111_exp_0927_cvv_123";
    let r = run(
        json!([
            call(leaked, json!({}), 3),
            call("weather", json!({"city": "Oslo"}), 5)
        ]),
        request(Value::Null),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 2);
    let said = r.named("envelope.retry.attempted")[0]["previousError"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!said.contains("4111") && !said.contains(leaked), "{said}");
    assert!(said.contains("weather, time"), "{said}");
}

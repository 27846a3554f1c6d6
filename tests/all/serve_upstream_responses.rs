//! An OpenAI-kind provider sent the Responses API (`api = "responses"`,
//! issue 52, item 5), against a loopback fake of `/responses`: a
//! structured call cut at `max_output_tokens` and retried with twice the
//! budget (two attempts, the schema as `text.format`), a tool loop's turns
//! as `function_call` and `function_call_output` items, and a streamed text
//! call relayed as the provider's `response.output_text.delta` events come;
//! whichever endpoint the call came in by.

use callai_tests::fake_server::{FakeServer, Received, Reply};
use callai_tests::serve::TestServer;
use serde_json::{Value, json};
use std::time::Duration;

/// A Responses answer: `status`, its text, its calls, `output` tokens.
fn response(status: &str, text: &str, calls: &[(&str, &str, &str)], output: u32) -> Reply {
    let mut items = Vec::new();
    if !text.is_empty() {
        items.push(
            json!({"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        );
    }
    items.extend(calls.iter().map(|(id, name, args)| {
        json!({"type": "function_call", "call_id": id, "name": name, "arguments": args})
    }));
    let mut body = json!({"id": "resp_up", "object": "response", "model": "r-1",
        "status": status, "output": items,
        "usage": {"input_tokens": 12, "output_tokens": output, "total_tokens": 12 + output}});
    if status == "incomplete" {
        body["incomplete_details"] = json!({"reason": "max_output_tokens"});
    }
    Reply::ok(body)
}

async fn server(replies: Vec<Reply>) -> (TestServer, FakeServer) {
    TestServer::before_fake("openai", "model = \"r-1\"\napi = \"responses\"", replies).await
}

fn input(r: &Received) -> &Vec<Value> {
    r.body["input"].as_array().expect("input items")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structured_call_cut_at_its_budget_is_retried_over_the_responses_api() {
    let schema = json!({"type": "object", "properties": {"scene": {"type": "string"}},
                        "required": ["scene"]});
    let (server, fake) = server(vec![
        response("incomplete", "{\"scene\": \"cu", &[], 50),
        response("completed", "{\"scene\": \"whole\"}", &[], 20),
    ])
    .await;
    let body = json!({"model": "p", "max_completion_tokens": 50,
        "messages": [{"role": "system", "content": "Be vivid."}, {"role": "user", "content": "A scene."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}});
    let answer = server.exchange("/v1/chat/completions", &body, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let content = answer.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"scene": "whole"})
    );
    assert_eq!(answer.headers.get("x-callai-attempts-count"), Some("2"));
    assert_eq!(
        answer.headers.get("x-callai-attempts-output-tokens"),
        Some("70")
    );
    let seen = fake.received();
    assert_eq!(seen[0].path, "/v1/responses");
    assert_eq!(
        seen[0].body["instructions"], "Be vivid.",
        "{}",
        seen[0].body
    );
    assert_eq!(seen[0].body["store"], false);
    assert_eq!(seen[0].body["text"]["format"]["type"], "json_schema");
    assert_eq!(seen[0].body["text"]["format"]["schema"], schema);
    assert_eq!(
        input(&seen[0])[0],
        json!({"role": "user", "content": "A scene."})
    );
    assert_eq!(seen[0].body["max_output_tokens"], 50);
    assert_eq!(seen[1].body["max_output_tokens"], 100, "the budget doubled");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_loop_goes_as_items_and_text_streams_as_it_comes() {
    let events: Vec<(Option<String>, String)> = [
        json!({"type": "response.created", "response": {"status": "in_progress", "output": []}}),
        json!({"type": "response.output_text.delta", "delta": "Sunny "}),
        json!({"type": "response.output_text.delta", "delta": "in Oslo."}),
        json!({"type": "response.completed", "response": {"status": "completed", "output": [],
               "usage": {"input_tokens": 30, "output_tokens": 4}}}),
    ]
    .into_iter()
    .map(|e| (e["type"].as_str().map(str::to_owned), e.to_string()))
    .collect();
    let streamed = Reply::Events {
        events,
        pause: Duration::from_millis(5),
        cut: false,
    };
    let (server, fake) = server(vec![
        response(
            "completed",
            "",
            &[("call_1", "weather", "{\"city\": \"Oslo\"}")],
            6,
        ),
        streamed,
    ])
    .await;
    let tools = json!([{"type": "function", "function": {"name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let mut messages = vec![json!({"role": "user", "content": "Weather in Oslo?"})];
    let body = json!({"model": "p", "messages": messages, "tools": tools});
    let answer = server.exchange("/v1/chat/completions", &body, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let message = answer.body["choices"][0]["message"].clone();
    assert_eq!(message["tool_calls"][0]["id"], "call_1", "{message}");
    assert_eq!(fake.received()[0].body["tools"][0]["name"], "weather");

    messages.push(message);
    messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}));
    let body = json!({"model": "p", "messages": messages, "stream": true});
    let events = server.events("/v1/chat/completions", &body, None).await;
    let pieces: String = (events.iter())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(pieces, "Sunny in Oslo.", "{events:?}");
    let seen = fake.received();
    assert_eq!(seen[1].body["stream"], true);
    let items = input(&seen[1]);
    assert_eq!(items[1]["type"], "function_call", "{items:?}");
    assert_eq!(items[1]["call_id"], "call_1");
    assert_eq!(
        items[2],
        json!({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})
    );
    server.shutdown().await;
}

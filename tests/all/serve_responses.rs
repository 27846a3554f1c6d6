//! The OpenAI Responses API through `callai serve` (issue 52), with the
//! clients people use, unchanged but for their base URL, against loopback
//! fakes: the `openai` client's `responses.create`, `responses.parse`
//! (two attempts, the corrective text sent), a two-step function-calling
//! loop whose first call is wrong, `responses.stream` (the typed events in
//! order, numbered), a built-in tool refused by name, the OpenAI Agents
//! SDK on its default model, LangChain's `ChatOpenAI(use_responses_api=True)`
//! and Codex CLI; a stream cut after text, and a
//! tool call streamed once judged. Each test checks what the fake
//! received. The mapping's own cases are in `serve_responses_mapping.rs`.

use callai_tests::clients::Clients;
use callai_tests::fake_server::{Received, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

/// Runs `scenario` against a server whose provider `p` speaks `api` to a
/// fake answering `replies`; what the client parsed and what the fake got.
async fn scenario(
    clients: &Clients,
    scenario: &'static str,
    api: Api,
    replies: Vec<Reply>,
) -> (Value, Vec<Received>) {
    let (server, fake) = TestServer::before_fake(api.name(), "model = \"m-1\"", replies).await;
    let (clients, base) = (clients.clone(), server.url.clone());
    let out = tokio::task::spawn_blocking(move || clients.responses(scenario, &base))
        .await
        .unwrap();
    server.shutdown().await;
    (out, fake.received())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_creates_and_parses_responses() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let (out, seen) = scenario(
        &clients,
        "create",
        api,
        vec![api.reply("Hi.", None, "stop", Some(3))],
    )
    .await;
    let response = &out["response"];
    assert_eq!(out["output_text"], "Hi.", "{out}");
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert!(
        response["id"].as_str().unwrap().starts_with("resp_"),
        "{response}"
    );
    assert_eq!(response["instructions"], "Be brief.");
    assert_eq!(response["metadata"], json!({"team": "a"}));
    assert_eq!(response["max_output_tokens"], 64);
    assert_eq!(response["usage"]["output_tokens"], 3, "{response}");
    assert_eq!(response["callai"]["attempts"]["count"], 1, "{response}");
    assert_eq!(out["headers"]["x-callai-attempts-count"], "1");
    assert_eq!(
        out["headers"]["x-callai-call-id"], response["id"],
        "the response's id is the call's"
    );
    assert_eq!(seen.len(), 1);
    assert_eq!(api.system_of(&seen[0]), "Be brief.");
    assert_eq!(seen[0].last_text(), "Say hi.");
    assert_eq!(api.max_tokens(&seen[0]), 64);

    // A schema violation, then a scene: two attempts, the complaint sent.
    let replies = vec![
        api.reply("{\"place\": 1}", None, "stop", Some(4)),
        api.reply("{\"scene\": \"ok\"}", None, "stop", Some(5)),
    ];
    let (out, seen) = scenario(&clients, "parse", api, replies).await;
    assert_eq!(out["parsed"], json!({"scene": "ok"}), "{out}");
    assert_eq!(out["response"]["callai"]["attempts"]["count"], 2);
    assert_eq!(out["response"]["callai"]["attempts"]["outputTokens"], 9);
    assert_eq!(
        out["response"]["usage"]["output_tokens"], 5,
        "the final attempt's"
    );
    assert_eq!(seen.len(), 2);
    let format = &seen[0].body["response_format"];
    assert_eq!(format["type"], "json_schema", "{}", seen[0].body);
    assert!(
        seen[1].body.to_string().contains("scene"),
        "{}",
        seen[1].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_calling_loop_counts_the_wrong_first_call() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let replies = vec![
        api.tool_reply("", &[("call_1", "weather", "{\"city\": ")], Some(7)),
        api.tool_reply(
            "",
            &[("call_2", "weather", "{\"city\": \"Oslo\"}")],
            Some(9),
        ),
        api.reply("Sunny in Oslo.", None, "stop", Some(5)),
    ];
    let (out, seen) = scenario(&clients, "loop", api, replies).await;
    assert_eq!(out["output_text"], "Sunny in Oslo.", "{out}");
    let first = &out["first"];
    let call = first["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .expect("a function_call item")
        .clone();
    assert_eq!(call["call_id"], "call_2", "{first}");
    assert_eq!(call["arguments"], "{\"city\": \"Oslo\"}");
    assert_eq!(first["callai"]["attempts"]["count"], 2);
    assert_eq!(out["headers"]["x-callai-attempts-count"], "2");
    assert_eq!(out["headers"]["x-callai-attempts-output-tokens"], "16");
    assert_eq!(seen.len(), 3);
    assert!(
        seen[1].last_text().contains("tool `weather`"),
        "{}",
        seen[1].last_text()
    );
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "weather");
    // The second turn: the call and its output go upstream as chat turns.
    let messages = seen[2].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["id"], "call_2",
        "{}",
        seen[2].body
    );
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_2");
    assert_eq!(tool["content"], "sunny in Oslo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_sends_the_typed_events_in_order() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let reply = api.stream_reply(&["one ", "two"], "stop", Some(2), Duration::from_millis(5));
    let (out, seen) = scenario(&clients, "stream", api, vec![reply]).await;
    assert_eq!(out["output_text"], "one two", "{out}");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["stream"], true, "the provider streams too");
    let events = out["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], n, "{event}");
    }
    let done = &events[9]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["usage"]["output_tokens"], 2, "{done}");
    assert_eq!(done["callai"]["attempts"]["count"], 1, "{done}");
    assert_eq!(out["final"]["id"], events[0]["response"]["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_tools_are_refused_by_name_and_the_agents_sdk_runs_one_tool() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let (out, seen) = scenario(&clients, "refused", api, vec![]).await;
    assert_eq!(out["error"], "BadRequestError", "{out}");
    assert_eq!(out["body"]["param"], "tools[0].type", "{out}");
    assert!(
        out["body"]["message"]
            .as_str()
            .unwrap()
            .contains("web_search")
    );
    assert!(seen.is_empty());

    let replies = vec![
        api.tool_reply(
            "",
            &[("call_1", "get_weather", "{\"city\": \"Oslo\"}")],
            Some(6),
        ),
        api.reply("It is sunny in Oslo.", None, "stop", Some(6)),
    ];
    let (out, seen) = scenario(&clients, "agents", api, replies).await;
    assert_eq!(out["final_output"], "It is sunny in Oslo.", "{out}");
    assert_eq!(seen.len(), 2);
    assert_eq!(api.system_of(&seen[0]), "Answer with the weather tool.");
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "get_weather");
    let tool = seen[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool's result goes upstream")
        .clone();
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(tool["content"], "sunny in Oslo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_cli_runs_a_turn_through_serve() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let replies = vec![api.reply("Hello from callai.", None, "stop", Some(5))];
    let (server, fake) = TestServer::before_fake("openai", "model = \"m-1\"", replies).await;
    let base = server.url.clone();
    let turn = tokio::task::spawn_blocking(move || clients.codex_exec("Say hello.", &base))
        .await
        .unwrap();
    assert_eq!(
        turn.last_message.trim(),
        "Hello from callai.",
        "{}",
        turn.stderr
    );
    let seen = fake.received();
    assert_eq!(seen.len(), 1, "one turn, one provider request");
    // Codex's shell tool reaches the provider as a function tool, and its
    // prompt as the last user message.
    let tools = seen[0].body["tools"]
        .as_array()
        .expect("Codex's tools")
        .clone();
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "exec_command"),
        "{tools:?}"
    );
    assert!(
        seen[0].last_text().contains("Say hello."),
        "{}",
        seen[0].last_text()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_fails_the_response_and_tool_calls_stream_judged() {
    let api = Api::OpenAi;
    let Reply::Events { events, pause, .. } =
        api.stream_reply(&["Half ", "a story"], "stop", Some(3), Duration::ZERO)
    else {
        unreachable!()
    };
    let cut = Reply::Events {
        events: events[..2].to_vec(),
        pause,
        cut: true,
    };
    let call = api.tool_reply(
        "",
        &[("call_9", "weather", "{\"city\": \"Oslo\"}")],
        Some(4),
    );
    let (server, fake) =
        TestServer::before_fake("openai", "model = \"m-1\"", vec![cut, call]).await;
    let all = server
        .events(
            "/v1/responses",
            &json!({"model": "p", "input": "a story", "stream": true}),
            None,
        )
        .await;
    let kinds: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.last(), Some(&"response.failed"), "{kinds:?}");
    let failed = &all.last().unwrap()["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "provider_unavailable", "{failed}");
    // The half that went out is the failed response's, marked incomplete.
    assert_eq!(failed["output"][0]["content"][0]["text"], "Half ");
    assert_eq!(failed["output"][0]["status"], "incomplete");
    assert_eq!(
        fake.received().len(),
        1,
        "the client has half: not sent again"
    );

    // A tool call is judged whole, then sent as its item's events.
    let tools = json!([{"type": "function", "name": "weather",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let body = json!({"model": "p", "input": "Oslo?", "tools": tools, "stream": true});
    let all = server.events("/v1/responses", &body, None).await;
    let kinds: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(all[4]["arguments"], "{\"city\": \"Oslo\"}");
    assert_eq!(all[5]["item"]["call_id"], "call_9");
    let output = &all[6]["response"]["output"];
    assert_eq!(output.as_array().unwrap().len(), 1, "{output}");
    assert_eq!(output[0]["type"], "function_call");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_on_the_responses_api_calls_a_tool_and_structures_output() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let replies = vec![
        api.tool_reply(
            "",
            &[("call_7", "weather", "{\"city\": \"Oslo\"}")],
            Some(5),
        ),
        api.reply("{\"scene\": \"a quay\"}", None, "stop", Some(6)),
    ];
    let (out, seen) = scenario(&clients, "langchain", api, replies).await;
    assert_eq!(out["tool_calls"][0]["name"], "weather", "{out}");
    assert_eq!(out["tool_calls"][0]["args"], json!({"city": "Oslo"}));
    assert_eq!(out["parsed"], json!({"scene": "a quay"}), "{out}");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "weather");
    assert_eq!(
        seen[1].body["response_format"]["type"], "json_schema",
        "{}",
        seen[1].body
    );
}

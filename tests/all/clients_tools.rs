//! Agents through `callai serve` (issue 33), with the clients people run
//! them on, unchanged but for their base URL: the `openai` Python and Node
//! clients and the `anthropic` client each through a two-step tool loop
//! whose first call the model gets wrong (two requests counted, the
//! corrective text sent, output tokens summed), LangChain's `bind_tools`
//! and both `with_structured_output`s, and the OpenAI Agents SDK running
//! one tool. Each test checks what the loopback fake provider received.

use callai_tests::clients::Clients;
use callai_tests::fake_server::{Received, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};

/// Runs `scenario` against a server whose provider `p` speaks `api` to a
/// fake answering `replies`; what the client parsed and what the fake got.
async fn agent(
    clients: &Clients,
    scenario: &'static str,
    api: Api,
    replies: Vec<Reply>,
) -> (Value, Vec<Received>) {
    let (server, fake) = TestServer::before_fake(api.name(), "model = \"m-1\"", replies).await;
    let (clients, base) = (clients.clone(), server.url.clone());
    let out = tokio::task::spawn_blocking(move || clients.agent(scenario, &base))
        .await
        .unwrap();
    server.shutdown().await;
    (out, fake.received())
}

/// A call the model gets wrong (for Anthropic, whose input is always an
/// object, against the schema), the right one, then the answer in text.
fn loop_replies(api: Api) -> Vec<Reply> {
    let (bad, id) = match api {
        Api::OpenAi => ("{\"city\": ", "call_2"),
        Api::Anthropic => ("{\"town\": \"Oslo\"}", "toolu_2"),
    };
    vec![
        api.tool_reply("", &[("call_1", "weather", bad)], Some(7)),
        api.tool_reply("", &[(id, "weather", "{\"city\": \"Oslo\"}")], Some(9)),
        api.reply("Sunny in Oslo.", None, "stop", Some(5)),
    ]
}

/// What every loop shows: two requests for the first step, the corrective
/// text naming the tool in the second, the tool's result in the third.
fn assert_loop(seen: &[Received], headers: &Value, extension: &Value, what: &str) {
    assert_eq!(seen.len(), 3, "{what}");
    assert!(
        seen[1].last_text().contains("tool `weather`"),
        "{what}: {}",
        seen[1].last_text()
    );
    assert!(
        seen[2].body.to_string().contains("sunny in Oslo"),
        "{what}: the tool's result goes upstream: {}",
        seen[2].body
    );
    assert_eq!(headers["x-callai-attempts-count"], "2", "{what}: {headers}");
    assert_eq!(headers["x-callai-attempts-output-tokens"], "16", "{what}");
    assert_eq!(extension["count"], 2, "{what}: {extension}");
    assert_eq!(extension["outputTokens"], 16, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_clients_run_a_tool_loop() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    for scenario in ["openai-loop", "openai-loop-node"] {
        let (out, seen) = agent(&clients, scenario, Api::OpenAi, loop_replies(Api::OpenAi)).await;
        let message = &out["first"]["choices"][0]["message"];
        let call = &message["tool_calls"][0];
        assert_eq!(call["function"]["name"], "weather", "{scenario}: {out}");
        assert_eq!(call["id"], "call_2");
        assert_eq!(out["first"]["choices"][0]["finish_reason"], "tool_calls");
        assert_loop(
            &seen,
            &out["headers"],
            &out["first"]["callai"]["attempts"],
            scenario,
        );
        let tool_message = &seen[2].body["messages"][2];
        assert_eq!(tool_message["role"], "tool", "{scenario}");
        assert_eq!(tool_message["tool_call_id"], "call_2");
        assert_eq!(seen[2].body["messages"][1]["tool_calls"][0]["id"], "call_2");
        assert_eq!(
            out["second"]["choices"][0]["message"]["content"],
            "Sunny in Oslo."
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_client_runs_a_tool_loop() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let (out, seen) = agent(
        &clients,
        "anthropic-loop",
        Api::Anthropic,
        loop_replies(Api::Anthropic),
    )
    .await;
    let first = &out["first"];
    assert_eq!(first["stop_reason"], "tool_use", "{out}");
    let block = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(block["input"], json!({"city": "Oslo"}));
    assert_loop(
        &seen,
        &out["headers"],
        &first["callai"]["attempts"],
        "anthropic",
    );
    let result = &seen[2].body["messages"][2];
    assert_eq!(result["role"], "user");
    assert_eq!(result["content"][0]["type"], "tool_result");
    assert_eq!(result["content"][0]["tool_use_id"], "toolu_2");
    assert_eq!(out["second"]["content"][0]["text"], "Sunny in Oslo.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_binds_tools_and_structures_output_by_function_calling() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let replies = vec![api.tool_reply(
        "",
        &[("call_1", "weather_tool", "{\"city\": \"Oslo\"}")],
        Some(6),
    )];
    let (out, seen) = agent(&clients, "langchain-tools", api, replies).await;
    assert_eq!(out["tool_calls"][0]["name"], "weather_tool", "{out}");
    assert_eq!(out["tool_calls"][0]["args"], json!({"city": "Oslo"}));
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "weather_tool");

    // with_structured_output(method="function_calling"): a forced call,
    // wrong once (against the schema), then right.
    let replies = vec![
        api.tool_reply("", &[("call_1", "weather", "{\"city\": 5}")], Some(4)),
        api.tool_reply(
            "",
            &[("call_2", "weather", "{\"city\": \"Oslo\"}")],
            Some(6),
        ),
    ];
    let (out, seen) = agent(&clients, "langchain-openai-structured", api, replies).await;
    assert_eq!(out["parsed"], json!({"city": "Oslo"}), "{out}");
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].body["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert!(seen[1].last_text().contains("tool `weather`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_anthropic_structures_output() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::Anthropic;
    let replies = vec![
        api.tool_reply(
            "",
            &[("toolu_1", "weather", "{\"place\": \"Oslo\"}")],
            Some(4),
        ),
        api.tool_reply(
            "",
            &[("toolu_2", "weather", "{\"city\": \"Oslo\"}")],
            Some(6),
        ),
    ];
    let (out, seen) = agent(&clients, "langchain-anthropic-structured", api, replies).await;
    assert_eq!(out["parsed"], json!({"city": "Oslo"}), "{out}");
    assert_eq!(seen.len(), 2, "the schema violation was retried");
    assert_eq!(seen[0].body["tools"][0]["name"], "weather");
    assert_eq!(seen[0].body["tool_choice"]["type"], "tool");
    assert_eq!(seen[0].body["tool_choice"]["name"], "weather");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_runs_one_tool() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let replies = vec![
        api.tool_reply(
            "",
            &[("call_1", "get_weather", "{\"city\": \"Oslo\"}")],
            Some(6),
        ),
        api.reply("It is sunny in Oslo.", None, "stop", Some(6)),
    ];
    let (out, seen) = agent(&clients, "agents", api, replies).await;
    assert_eq!(out["final_output"], "It is sunny in Oslo.", "{out}");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "get_weather");
    let tool_message = seen[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool's result goes upstream")
        .clone();
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert_eq!(tool_message["content"], "sunny in Oslo");
}

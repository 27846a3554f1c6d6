//! The Responses API's mapping through `callai serve` (issue 52), over
//! plain HTTP against loopback fakes: an Anthropic-kind provider behind it,
//! mapped both ways; a reasoning effort sent to a reasoning model (its
//! reasoning and cached tokens in the answer's usage; and by
//! Chat Completions too) and refused by each API's own name for a model
//! that does not reason; and what the host cannot honour refused naming
//! the field, nothing sent.

use callai_tests::fake_server::Reply;
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_provider_answers_a_response_mapped_both_ways() {
    let api = Api::Anthropic;
    let replies = vec![
        api.tool_reply(
            "Looking.",
            &[("toolu_1", "weather", "{\"city\": \"Oslo\"}")],
            Some(8),
        ),
        api.reply("Sunny.", None, "stop", Some(2)),
    ];
    let (server, fake) = TestServer::before_fake("anthropic", "model = \"m-1\"", replies).await;
    let tools = json!([{"type": "function", "name": "weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let request = json!({"model": "p", "instructions": "Use tools.", "input": "Oslo?",
                         "tools": tools, "max_output_tokens": 300});
    let answer = server.exchange("/v1/responses", &request, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let output = answer.body["output"].as_array().unwrap().clone();
    assert_eq!(output[0]["type"], "message", "{output:?}");
    assert_eq!(output[0]["content"][0]["text"], "Looking.");
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(output[1]["call_id"], "toolu_1");
    let sent = &fake.received()[0].body;
    assert_eq!(sent["system"], "Use tools.", "{sent}");
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(sent["tools"][0]["name"], "weather");

    // The next turn: the model's items back, with the tool's output.
    let mut input = vec![json!({"role": "user", "content": "Oslo?"})];
    input.extend(output);
    input.push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"}));
    let next = json!({"model": "p", "input": input, "tools": tools});
    let answer = server.exchange("/v1/responses", &next, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["output"][0]["content"][0]["text"], "Sunny.");
    let sent = &fake.received()[1].body;
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant", "{sent}");
    let blocks = messages[1]["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "tool_use" && b["id"] == "toolu_1"),
        "{sent}"
    );
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sent}");
    assert_eq!(result["tool_use_id"], "toolu_1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reasoning_effort_reaches_a_reasoning_model_and_is_refused_for_others() {
    let api = Api::OpenAi;
    let replies = vec![
        // A reasoning model's answer: its usage says what it spent reasoning
        // and what it read from its prompt cache.
        Reply::ok(
            json!({"id": "c1", "object": "chat.completion", "model": "o3-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Thought."}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 9,
                      "prompt_tokens_details": {"cached_tokens": 16},
                      "completion_tokens_details": {"reasoning_tokens": 6}}}),
        ),
        api.reply("Thought too.", None, "stop", Some(9)),
        api.reply("Plain.", None, "stop", Some(2)),
    ];
    let (server, fake) = TestServer::before_fake("openai", "model = \"m-1\"", replies).await;
    let body = json!({"model": "p/o3-mini", "input": "x", "reasoning": {"effort": "high", "summary": "auto"}});
    let answer = server.exchange("/v1/responses", &body, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["reasoning"]["effort"], "high");
    let usage = &answer.body["usage"];
    assert_eq!(usage["output_tokens"], 9, "{usage}");
    assert_eq!(
        usage["output_tokens_details"]["reasoning_tokens"], 6,
        "{usage}"
    );
    assert_eq!(
        usage["input_tokens_details"]["cached_tokens"], 16,
        "{usage}"
    );
    let chat = json!({"model": "p/gpt-5-mini", "reasoning_effort": "low",
                      "messages": [{"role": "user", "content": "x"}]});
    let answer = server.exchange("/v1/chat/completions", &chat, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let seen = fake.received();
    assert_eq!(seen[0].body["reasoning_effort"], "high", "{}", seen[0].body);
    assert_eq!(seen[0].body["model"], "o3-mini");
    assert_eq!(seen[1].body["reasoning_effort"], "low", "{}", seen[1].body);

    // A model that does not reason: refused by the API's own name, nothing sent.
    let body = json!({"model": "p", "input": "x", "reasoning": {"effort": "high"}});
    let answer = server.exchange("/v1/responses", &body, None).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(
        answer.body["error"]["param"], "reasoning.effort",
        "{}",
        answer.body
    );
    let chat = json!({"model": "p", "reasoning_effort": "low",
                      "messages": [{"role": "user", "content": "x"}]});
    let answer = server.exchange("/v1/chat/completions", &chat, None).await;
    assert_eq!(
        answer.body["error"]["param"], "reasoning_effort",
        "{}",
        answer.body
    );
    // `none` asks for nothing, of any model.
    let body = json!({"model": "p", "input": "x", "reasoning": {"effort": "none"}, "store": false});
    let answer = server.exchange("/v1/responses", &body, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let seen = fake.received();
    assert_eq!(seen.len(), 3);
    assert!(
        seen[2].body.get("reasoning_effort").is_none(),
        "{}",
        seen[2].body
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_host_cannot_honour_is_refused_naming_the_field() {
    let (server, fake) = TestServer::before_fake("openai", "model = \"m-1\"", vec![]).await;
    let cases = [
        (
            json!({"model": "p", "input": "x", "frobnicate": 1}),
            "frobnicate",
        ),
        (json!({"model": "p"}), "input"),
        (
            json!({"model": "p", "input": "x", "previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
        (
            json!({"model": "p", "input": "x", "background": true}),
            "background",
        ),
        (
            json!({"model": "p", "input": "x", "include": ["file_search_call.results"]}),
            "include",
        ),
        (
            json!({"model": "p", "input": "x", "reasoning": {"effort": "high"}}),
            "reasoning",
        ),
        (
            json!({"model": "p", "input": [{"type": "item_reference", "id": "i"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "p", "input": "x", "tool_choice": {"type": "web_search"}}),
            "tool_choice",
        ),
    ];
    for (body, field) in cases {
        let answer = server.exchange("/v1/responses", &body, None).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        let error = &answer.body["error"];
        assert_eq!(error["type"], "invalid_request_error", "{body}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {error}");
        if field == "previous_response_id" {
            // Without a run log nothing is kept, and the refusal says why.
            assert!(message.contains("[runlog] url"), "{error}");
        }
    }
    assert!(
        fake.received().is_empty(),
        "nothing refused reaches the provider"
    );
    server.shutdown().await;
}

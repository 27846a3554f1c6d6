//! The Converse wire format alone: the body an attempt sends, the endpoint
//! it goes to, and how answers and stream events read.

use super::*;
use callai_engine::{StopReason, ToolsRequest};
use callai_wire::{Image, Tool, ToolCall};
use serde_json::json;
use std::sync::Arc;

fn request(messages: Vec<Message>) -> ProviderRequest {
    ProviderRequest {
        model: None,
        system_prompt: Some("Be brief.".into()),
        messages,
        temperature: Some(0.5),
        max_tokens: 64,
        stop_sequences: vec!["END".into()],
        structured: None,
        tools: None,
        token_limit_field: None,
        prompt_cache: None,
        thinking: None,
        embedding: None,
        reasoning_effort: None,
    }
}

fn body(r: &ProviderRequest) -> Value {
    let bytes = BedrockWire::body("m", r, Delivery::Whole, &Upstream::default());
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn a_tool_loop_is_tool_use_and_tool_result_blocks_in_merged_turns() {
    let mut user = Message::new(Role::User, "Look it up.");
    user.images = vec![Image {
        url: "data:image/png;base64,iVBORw0K".into(),
        detail: None,
    }];
    let mut call = Message::new(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "lookup".into(),
        arguments: r#"{"q": 1}"#.into(),
    }];
    let mut result = Message::new(Role::Tool, "42");
    result.tool_call_id = Some("c1".into());
    let mut r = request(vec![user, call, result, Message::new(Role::User, "And?")]);
    r.tools = Some(ToolsRequest {
        tools: Arc::from(vec![Tool {
            name: "lookup".into(),
            description: Some("Finds things.".into()),
            parameters: json!({"type": "object"}),
            strict: None,
        }]),
        choice: Choice::Required,
        parallel: None,
    });
    let b = body(&r);
    assert_eq!(b["system"], json!([{"text": "Be brief."}]));
    assert_eq!(
        b["inferenceConfig"],
        json!({"maxTokens": 64, "temperature": 0.5, "stopSequences": ["END"]})
    );
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [
                {"image": {"format": "png", "source": {"bytes": "iVBORw0K"}}},
                {"text": "Look it up."}]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "c1", "name": "lookup", "input": {"q": 1}}}]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "c1", "content": [{"text": "42"}]}},
                {"text": "And?"}]}
        ])
    );
    assert_eq!(b["toolConfig"]["toolChoice"], json!({"any": {}}));
    // No `none` in Converse: tools that may not be called are declared
    // only because earlier turns used them, with no choice.
    r.tools.as_mut().unwrap().choice = Choice::None;
    assert_eq!(body(&r)["toolConfig"].get("toolChoice"), None);
    let plain = request(vec![Message::new(Role::User, "Hi")]);
    assert_eq!(body(&plain).get("toolConfig"), None);
}

#[test]
fn the_endpoint_encodes_the_model_id_and_a_url_image_is_refused() {
    let path = |d| {
        BedrockWire::path_for("anthropic.claude-v2:1", d)
            .unwrap()
            .unwrap()
            .0
    };
    assert_eq!(
        path(Delivery::Whole),
        "/model/anthropic.claude-v2%3A1/converse"
    );
    assert_eq!(
        path(Delivery::Streamed),
        "/model/anthropic.claude-v2%3A1/converse-stream"
    );
    let arn = BedrockWire::path_for(
        "arn:aws:bedrock:us-east-1:1:inference-profile/x",
        Delivery::Whole,
    );
    assert!(arn.unwrap().unwrap().0.contains("inference-profile%2Fx"));
    let mut m = Message::new(Role::User, "See.");
    m.images = vec![Image {
        url: "https://example.com/a.png".into(),
        detail: None,
    }];
    let why = BedrockWire::unsendable(&request(vec![m])).unwrap();
    assert!(why.contains("messages[0].images[0]"), "{why}");
}

#[test]
fn answers_and_stream_events_read_with_their_stop_reasons_and_cache_usage() {
    let whole: Converse = serde_json::from_value(json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "No."}]}},
        "stopReason": "guardrail_intervened",
        "usage": {"inputTokens": 5, "outputTokens": 1, "cacheReadInputTokens": 20,
                  "cacheWriteInputTokens": 3}}))
    .unwrap();
    let reply = BedrockWire::reply(whole).unwrap();
    assert_eq!(reply.stop, StopReason::ContentFilter);
    assert_eq!(
        (
            reply.input_tokens,
            reply.cached_input_tokens,
            reply.cache_write_input_tokens
        ),
        (Some(28), Some(20), Some(3))
    );
    let mut acc = Folded::default();
    let events = [
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 1,
            "start": {"toolUse": {"toolUseId": "t", "name": "lookup"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"q\""}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": ": 1}"}}}),
        ),
        ("messageStop", json!({"stopReason": "max_tokens"})),
    ];
    for (kind, data) in events {
        let event = BedrockWire::event(kind, &data.to_string()).unwrap();
        BedrockWire::fold(&mut acc, event).unwrap();
    }
    let reply = BedrockWire::finish(acc).unwrap();
    assert_eq!(reply.stop, StopReason::Length);
    assert_eq!(reply.tool_calls[0].arguments, r#"{"q": 1}"#);
    assert_eq!(reply.input_tokens, None, "no metadata: usage unknown");
    let cut = BedrockWire::finish(Folded::default()).err().unwrap();
    assert!(cut.message.contains("messageStop"), "{}", cut.message);
}

#[test]
fn a_bedrock_section_needs_a_region_that_no_other_takes() {
    let check = |section: &str| {
        let sections: crate::ProvidersConfig = toml::from_str(section).unwrap();
        crate::validate(&sections).map(|()| sections)
    };
    let e = check("[bedrock]\n").unwrap_err().to_string();
    assert!(
        e.contains("providers.bedrock.region") && e.contains("required"),
        "{e}"
    );
    let e = check("[o]\nkind = \"openai\"\nregion = \"us-east-1\"\n").unwrap_err();
    assert!(e.to_string().contains("providers.o.region"), "{e}");
    let e = check("[bedrock]\nregion = \"us-east-1/x\"\n").unwrap_err();
    assert!(e.to_string().contains("lower-case"), "{e}");
    let ok = check("[bedrock]\nregion = \"eu-west-1\"\n").unwrap();
    let s = ok["bedrock"].settings("bedrock").unwrap();
    assert_eq!(
        s.base_url,
        "https://bedrock-runtime.eu-west-1.amazonaws.com"
    );
    assert_eq!(s.api_key_env, "");
    let limits = callai_engine::config::Limits::default();
    let e = crate::start(&ok, &|_| None, &limits)
        .unwrap_err()
        .to_string();
    assert!(e.contains("AWS_ACCESS_KEY_ID"), "{e}");
}

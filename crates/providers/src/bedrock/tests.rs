//! The Converse wire format alone: the body an attempt sends, the endpoint
//! it goes to, and how answers and stream events read.

use super::*;
use crate::test_request::request;
use callai_engine::{StopReason, ToolsRequest};
use callai_wire::{
    Image, Message, PromptCache, Role, SystemBlock, Thinking, ThinkingBlock, ThinkingConfig,
    ThinkingKind, Tool, ToolCall, ToolChoice as Choice,
};
use serde_json::{Value, json};
use std::sync::Arc;

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

fn lookup_tool() -> ToolsRequest {
    ToolsRequest {
        tools: Arc::from(vec![Tool {
            name: "lookup".into(),
            description: None,
            parameters: json!({"type": "object"}),
            strict: None,
        }]),
        choice: Choice::Auto,
        parallel: None,
    }
}

#[test]
fn breakpoints_become_cache_points_after_what_they_end() {
    let mut r = request(vec![
        Message::new(Role::User, "A long document."),
        Message::new(Role::Assistant, "Ready."),
        Message::new(Role::User, "Now?"),
    ]);
    r.system_prompt = Some("Style guide. Be brief.".into());
    r.tools = Some(lookup_tool());
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    r.prompt_cache = Some(Arc::new(PromptCache {
        system: vec![
            SystemBlock {
                text: "Style guide.".into(),
                cache_control: Some(hour.clone()),
            },
            SystemBlock {
                text: " Be brief.".into(),
                cache_control: None,
            },
        ],
        messages: vec![(0, json!({"type": "ephemeral"}))],
        tools: vec![(0, hour)],
        field: "system[0].cache_control".into(),
    }));
    let b = body(&r);
    assert_eq!(
        b["system"],
        json!([{"text": "Style guide."}, {"cachePoint": {"type": "default", "ttl": "1h"}},
               {"text": " Be brief."}])
    );
    assert_eq!(
        b["messages"][0]["content"],
        json!([{"text": "A long document."}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(b["messages"][2]["content"], json!([{"text": "Now?"}]));
    assert_eq!(
        b["toolConfig"]["tools"][1],
        json!({"cachePoint": {"type": "default", "ttl": "1h"}})
    );
    // A prompt changed on the way (a prompt-mode instruction first) is one
    // text: the breakpoints no longer mark what the client meant.
    r.system_prompt = Some("Answer in JSON. Style guide. Be brief.".into());
    assert_eq!(
        body(&r)["system"],
        json!([{"text": "Answer in JSON. Style guide. Be brief."}])
    );
}

#[test]
fn thinking_goes_in_additional_fields_and_earlier_reasoning_leads_its_turn() {
    let mut r = request(vec![
        Message::new(Role::User, "Sum 2 and 2."),
        Message::new(Role::Assistant, "4."),
        Message::new(Role::User, "Times 3?"),
    ]);
    r.thinking = Some(Arc::new(Thinking {
        config: Some(ThinkingConfig {
            kind: ThinkingKind::Enabled,
            budget_tokens: Some(1024),
            display: None,
        }),
        history: vec![(
            1,
            vec![
                ThinkingBlock::Thinking {
                    thinking: "Two and two.".into(),
                    signature: "sig-1".into(),
                },
                ThinkingBlock::RedactedThinking {
                    data: "c2VjcmV0".into(),
                },
            ],
        )],
    }));
    let upstream = Upstream {
        extra_body: serde_json::from_value(json!({
            "additionalModelRequestFields": {"top_k": 5},
            "guardrailConfig": {"guardrailIdentifier": "g"}}))
        .unwrap(),
        ..Default::default()
    };
    let bytes = BedrockWire::body("m", &r, Delivery::Whole, &upstream);
    let b: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        b["additionalModelRequestFields"],
        json!({"top_k": 5, "thinking": {"type": "enabled", "budget_tokens": 1024}})
    );
    assert_eq!(b["guardrailConfig"], json!({"guardrailIdentifier": "g"}));
    assert_eq!(
        b["messages"][1]["content"],
        json!([
            {"reasoningContent": {"reasoningText": {"text": "Two and two.", "signature": "sig-1"}}},
            {"reasoningContent": {"redactedContent": "c2VjcmV0"}},
            {"text": "4."}])
    );
    // No thinking asked: the operator's fields go as they are.
    r.thinking = None;
    let bytes = BedrockWire::body("m", &r, Delivery::Whole, &upstream);
    let b: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(b["additionalModelRequestFields"], json!({"top_k": 5}));
}

#[test]
fn reasoning_reads_as_thinking_whole_and_streamed() {
    let whole: Converse = serde_json::from_value(json!({
        "output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Hmm.", "signature": "s1"}}},
            {"reasoningContent": {"redactedContent": "ZW5j"}},
            {"text": "12."}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 5, "outputTokens": 40}}))
    .unwrap();
    let reply = BedrockWire::reply(whole).unwrap();
    assert_eq!(reply.content, "12.");
    let want = vec![
        ThinkingBlock::Thinking {
            thinking: "Hmm.".into(),
            signature: "s1".into(),
        },
        ThinkingBlock::RedactedThinking {
            data: "ZW5j".into(),
        },
    ];
    assert_eq!(reply.thinking, want);
    let mut acc = Folded::default();
    let delta = |i: usize, d: Value| {
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": i, "delta": d}),
        )
    };
    let events = [
        delta(0, json!({"reasoningContent": {"text": "Hm"}})),
        delta(0, json!({"reasoningContent": {"text": "m."}})),
        delta(0, json!({"reasoningContent": {"signature": "s1"}})),
        delta(1, json!({"reasoningContent": {"redactedContent": "ZW5j"}})),
        delta(2, json!({"text": "12."})),
        ("messageStop", json!({"stopReason": "end_turn"})),
    ];
    let mut said = Vec::new();
    for (kind, data) in events {
        let event = BedrockWire::event(kind, &data.to_string()).unwrap();
        said.extend(BedrockWire::fold(&mut acc, event).unwrap());
    }
    assert_eq!(said, ["12."], "reasoning is not the answer's text");
    let reply = BedrockWire::finish(acc).unwrap();
    assert_eq!(reply.thinking, want);
    assert_eq!(reply.content, "12.");
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
    let e = check("[o]\nkind = \"openai\"\nprofile = \"ci\"\n").unwrap_err();
    assert!(e.to_string().contains("providers.o.profile"), "{e}");
    let e = check("[bedrock]\nregion = \"us-east-1\"\nprofile = \"ci\"\napiKeyEnv = \"K\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("providers.bedrock.profile") && e.contains("apiKeyEnv"),
        "{e}"
    );
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

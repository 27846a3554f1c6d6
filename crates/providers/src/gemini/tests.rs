//! The Gemini wire format alone: the body an attempt sends, the endpoint
//! it goes to, and how answers and stream chunks read.

use super::*;
use crate::test_request::request;
use callai_engine::{StopReason, StructuredRequest, ToolsRequest};
use callai_wire::{Tool, ToolCall};
use serde_json::json;
use std::sync::Arc;

fn body(r: &ProviderRequest) -> Value {
    let bytes = <GeminiWire>::body("gemini-2.5-flash", r, Delivery::Whole, &Upstream::default());
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn a_body_has_its_system_instruction_turns_and_generation_config() {
    let png = Image {
        url: "data:image/png;base64,iVBORw0K".into(),
        detail: None,
    };
    let mut r = request(vec![
        Message::new(Role::System, "Answer in French."),
        Message::user_with_images("What is this?", vec![png]),
        Message::user("Tell me."),
        Message::new(Role::Assistant, "Un chat."),
    ]);
    r.structured = Some(StructuredRequest {
        mode: StructuredOutput::Native,
        schema: Arc::new(json!({"type": "object"})),
    });
    let b = body(&r);
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "Be brief.\n\nAnswer in French."}]})
    );
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}},
                {"text": "What is this?"},
                {"text": "Tell me."}]},
            {"role": "model", "parts": [{"text": "Un chat."}]}
        ])
    );
    assert_eq!(
        b["generationConfig"],
        json!({"maxOutputTokens": 64, "temperature": 0.5, "stopSequences": ["END"],
               "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}})
    );
    r.structured.as_mut().unwrap().mode = StructuredOutput::Prompt;
    assert!(
        body(&r)["generationConfig"]
            .get("responseJsonSchema")
            .is_none()
    );
}

#[test]
fn tools_go_as_function_declarations_and_a_loop_as_calls_and_responses() {
    let mut call = Message::new(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "lookup".into(),
        arguments: r#"{"q": "x"}"#.into(),
    }];
    let mut result = Message::new(Role::Tool, "42");
    result.tool_call_id = Some("c1".into());
    let mut r = request(vec![Message::user("Look it up."), call, result]);
    r.tools = Some(ToolsRequest {
        tools: Arc::from(vec![Tool {
            name: "lookup".into(),
            description: Some("Finds things.".into()),
            parameters: json!({"type": "object"}),
            strict: None,
        }]),
        choice: Choice::Tool("lookup".into()),
        parallel: None,
    });
    let b = body(&r);
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [{"name": "lookup", "description": "Finds things.",
                                          "parametersJsonSchema": {"type": "object"}}]}])
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}})
    );
    assert_eq!(
        b["contents"][1],
        json!({"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}}}]})
    );
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "lookup",
                                                              "response": {"result": "42"}}}]})
    );
}

#[test]
fn the_endpoint_names_the_model_and_a_stream_asks_for_sse() {
    let whole = <GeminiWire>::path_for("models/gemini-2.5-pro", Delivery::Whole);
    assert_eq!(
        whole.unwrap().unwrap(),
        ("/models/gemini-2.5-pro:generateContent".to_owned(), &[][..])
    );
    let (path, query) = <GeminiWire>::path_for("gemini-2.5-flash", Delivery::Streamed)
        .unwrap()
        .unwrap();
    assert_eq!(path, "/models/gemini-2.5-flash:streamGenerateContent");
    assert_eq!(query, &[("alt", "sse")]);
    for bad in ["../files", "a/b", "m?key=x", "m:x", ""] {
        let e = <GeminiWire>::path_for(bad, Delivery::Whole)
            .unwrap()
            .unwrap_err();
        assert!(e.contains("not a Gemini model name"), "{bad}: {e}");
    }
}

fn read(answer: Value) -> ProviderReply {
    <GeminiWire>::reply(serde_json::from_value(answer).unwrap()).unwrap()
}

#[test]
fn an_answer_reads_its_text_calls_finish_and_usage() {
    let reply = read(json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "thinking...", "thought": true},
            {"text": "Hello"}, {"text": " there"},
            {"functionCall": {"name": "lookup", "args": {"q": 1}}}]},
            "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "cachedContentTokenCount": 8,
                          "candidatesTokenCount": 5, "thoughtsTokenCount": 7},
        "modelVersion": "gemini-2.5-flash"}));
    assert_eq!(reply.content, "Hello there");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].arguments, r#"{"q":1}"#);
    assert!(reply.tool_calls[0].id.starts_with("call_gemini_"));
    assert_eq!(reply.stop_said(), StopReason::ToolCall);
    assert_eq!(
        (reply.input_tokens, reply.cached_input_tokens),
        (Some(20), Some(8))
    );
    assert_eq!(
        (reply.output_tokens, reply.reasoning_tokens),
        (Some(12), Some(7)),
        "thoughts are output"
    );
    assert_eq!(reply.model.as_deref(), Some("gemini-2.5-flash"));
    for (reason, stop) in [
        ("MAX_TOKENS", StopReason::Length),
        ("SAFETY", StopReason::ContentFilter),
        ("RECITATION", StopReason::ContentFilter),
        ("PROHIBITED_CONTENT", StopReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", StopReason::Other),
    ] {
        let reply = read(
            json!({"candidates": [{"content": {"parts": [{"text": "x"}]},
                                                "finishReason": reason}]}),
        );
        assert_eq!(reply.stop, stop, "{reason}");
    }
    let blocked = read(json!({"promptFeedback": {"blockReason": "SAFETY"},
                              "usageMetadata": {"promptTokenCount": 3}}));
    assert_eq!(blocked.stop, StopReason::ContentFilter);
    assert_eq!(blocked.output_tokens, Some(0));
    let none: Response = serde_json::from_value(json!({"candidates": []})).unwrap();
    assert_eq!(
        <GeminiWire>::reply(none).unwrap_err().kind,
        callai_engine::FailureKind::Transient
    );
}

#[test]
fn a_stream_folds_chunk_by_chunk_and_a_cut_one_fails() {
    let chunks = [
        json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "lo"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "MAX_TOKENS"}],
               "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}}),
    ];
    let mut folded = Folded::default();
    let mut sent = Vec::new();
    for chunk in &chunks {
        let added = <GeminiWire>::fold(&mut folded, serde_json::from_value(chunk.clone()).unwrap());
        sent.extend(added.unwrap());
    }
    assert_eq!(sent, ["Hel", "lo"]);
    let reply = <GeminiWire>::finish(folded).unwrap();
    assert_eq!(
        (reply.content.as_str(), reply.stop, reply.output_tokens),
        ("Hello", StopReason::Length, Some(2))
    );
    let mut cut = Folded::default();
    <GeminiWire>::fold(&mut cut, serde_json::from_value(chunks[0].clone()).unwrap()).unwrap();
    let e = <GeminiWire>::finish(cut).unwrap_err();
    assert!(e.message.contains("finishReason"), "{e}");
    let mut failed = Folded::default();
    let error = json!({"error": {"code": 503, "message": "overloaded"}});
    let e = <GeminiWire>::fold(&mut failed, serde_json::from_value(error).unwrap()).unwrap_err();
    assert_eq!(e.kind, callai_engine::FailureKind::Transient);
}

#[test]
fn thinking_and_reasoning_effort_become_thinking_config() {
    use callai_wire::{Thinking, ThinkingConfig, ThinkingKind};
    let thinking = |kind, budget_tokens| {
        Some(Arc::new(Thinking {
            config: Some(ThinkingConfig {
                kind,
                budget_tokens,
                display: None,
            }),
            history: Vec::new(),
        }))
    };
    let mut r = request(vec![Message::user("hi")]);
    assert_eq!(body(&r)["generationConfig"].get("thinkingConfig"), None);
    for (kind, budget, expected) in [
        (ThinkingKind::Enabled, Some(2000), 2000),
        (ThinkingKind::Adaptive, None, -1),
        (ThinkingKind::Disabled, None, 0),
    ] {
        r.thinking = thinking(kind, budget);
        let config = &body(&r)["generationConfig"];
        assert_eq!(
            config["thinkingConfig"],
            json!({"thinkingBudget": expected})
        );
        assert_eq!(config["maxOutputTokens"], 64, "the host's own fields stay");
    }
    r.thinking = None;
    r.reasoning_effort = Some("low".into());
    assert_eq!(
        body(&r)["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 1024})
    );
    assert!(<GeminiWire>::takes_reasoning("gemini-2.5-flash"));
    assert!(<GeminiWire>::takes_reasoning("models/gemini-3-pro-preview"));
    assert!(!<GeminiWire>::takes_reasoning("gemini-2.0-flash"));
}

#[test]
fn extra_generation_config_fills_in_under_the_hosts_own_fields() {
    let extra: Map<String, Value> = serde_json::from_value(json!({
        "generationConfig": {"topK": 5, "maxOutputTokens": 9999,
                             "thinkingConfig": {"thinkingBudget": 0}},
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
    }))
    .unwrap();
    let upstream = Upstream {
        extra_body: extra,
        ..Upstream::default()
    };
    let mut r = request(vec![Message::user("hi")]);
    let read = |r: &ProviderRequest| -> Value {
        let bytes = <GeminiWire>::body("gemini-2.5-flash", r, Delivery::Whole, &upstream);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.matches("generationConfig").count(), 1, "{text}");
        serde_json::from_str(&text).unwrap()
    };
    let b = read(&r);
    assert_eq!(b["generationConfig"]["maxOutputTokens"], 64);
    assert_eq!(b["generationConfig"]["topK"], 5);
    assert_eq!(b["generationConfig"]["thinkingConfig"]["thinkingBudget"], 0);
    assert_eq!(b["safetySettings"][0]["threshold"], "BLOCK_NONE");
    r.reasoning_effort = Some("high".into());
    assert_eq!(
        read(&r)["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        4096,
        "the call's own wins"
    );
}

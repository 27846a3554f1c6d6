//! The Messages API answer reader's tests: messages, streams, the cache's
//! counts and thinking blocks.

use super::*;

fn event(json: &str) -> Event {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_message_reads_its_tool_input_as_sent() {
    let m: Message = serde_json::from_str(
        r#"{"model": "c", "stop_reason": "tool_use", "usage": {"input_tokens": 9},
            "content": [{"type": "text", "text": "x"},
                        {"type": "tool_use", "name": "respond", "input": {"a": [1, 2]}}]}"#,
    )
    .unwrap();
    let r = m.into_reply().unwrap();
    assert_eq!(r.content, "x");
    assert_eq!(r.tool_calls[0].name, "respond");
    assert_eq!(r.tool_calls[0].arguments, r#"{"a": [1, 2]}"#);
    assert_eq!((r.input_tokens, r.output_tokens), (Some(9), None));
}

#[test]
fn cache_reads_and_writes_count_as_input_and_reads_as_cached() {
    let m: Message = serde_json::from_str(
        r#"{"model": "c", "stop_reason": "end_turn", "content": [{"type": "text", "text": "x"}],
            "usage": {"input_tokens": 9, "output_tokens": 2,
                      "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 50}}"#,
    )
    .unwrap();
    let r = m.into_reply().unwrap();
    assert_eq!(
        (r.input_tokens, r.cached_input_tokens),
        (Some(1059), Some(1000))
    );
    let plain: Message = serde_json::from_str(
        r#"{"content": [], "usage": {"input_tokens": 9, "output_tokens": 2}}"#,
    )
    .unwrap();
    let r = plain.into_reply().unwrap();
    assert_eq!((r.input_tokens, r.cached_input_tokens), (Some(9), None));
}

#[test]
fn a_stream_folds_its_blocks_and_needs_its_end() {
    let mut f = Folded::default();
    for e in [
        r#"{"type": "message_start", "message": {"model": "c", "usage": {"input_tokens": 5}}}"#,
        r#"{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}"#,
    ] {
        f.fold(event(e)).unwrap();
    }
    let text = f
        .fold(event(
            r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}"#,
        ))
        .unwrap();
    assert_eq!(text.as_deref(), Some("hi"));
    f.fold(event(
        r#"{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}"#,
    ))
    .unwrap();
    f.fold(event(r#"{"type": "message_stop"}"#)).unwrap();
    let r = f.into_reply().unwrap();
    assert_eq!(r.content, "hi");
    assert_eq!((r.input_tokens, r.output_tokens), (Some(5), Some(2)));
    // Issue 31 #14: a stream that just ends is a cut.
    let mut cut = Folded::default();
    cut.fold(event(
        r#"{"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}"#,
    ))
    .unwrap();
    assert!(cut.into_reply().unwrap_err().message.contains("cut"));
}

#[test]
fn thinking_blocks_are_kept_whole_and_streamed() {
    let m: Message = serde_json::from_str(
        r#"{"stop_reason": "end_turn", "usage": {"output_tokens": 300},
            "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "enc"},
                        {"type": "text", "text": "x"}]}"#,
    )
    .unwrap();
    let r = m.into_reply().unwrap();
    let expected = vec![
        ThinkingBlock::Thinking {
            thinking: "hm".into(),
            signature: "sig".into(),
        },
        ThinkingBlock::RedactedThinking { data: "enc".into() },
    ];
    assert_eq!((r.content.as_str(), &r.thinking), ("x", &expected));
    let mut f = Folded::default();
    for e in [
        r#"{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}"#,
        r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "h"}}"#,
        r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "m"}}"#,
        r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}"#,
        r#"{"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "enc"}}"#,
        r#"{"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}"#,
        r#"{"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "x"}}"#,
        r#"{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 300}}"#,
    ] {
        f.fold(event(e)).unwrap();
    }
    let r = f.into_reply().unwrap();
    assert_eq!((r.content.as_str(), &r.thinking), ("x", &expected));
    assert_eq!(r.output_tokens, Some(300));
}

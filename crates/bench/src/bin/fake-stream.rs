//! A loopback OpenAI-compatible chat-completions server that answers
//! every request with one long text: `--bytes N` of it, streamed as
//! server-sent events of `--piece P` bytes (the whole text in one event
//! with `--piece 0`), a space every 8 bytes unless `--no-space` (then
//! base64-like characters only, as a model emitting an encoded blob), then
//! a finish reason, usage and `[DONE]`. A request with `"stream": false`
//! gets the same text as one chat completion. Prints `listening on
//! http://ADDR` once it accepts. For `bench/stream.py`.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::Arc;

/// The answer's text: `bytes` of it.
fn text(bytes: usize, spaces: bool) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..bytes)
        .map(|i| {
            if spaces && i % 8 == 7 {
                ' '
            } else {
                ALPHABET[(i * 7 + i / 64) % ALPHABET.len()] as char
            }
        })
        .collect()
}

/// The SSE body: the text in events of `piece` bytes, then the end.
fn events(text: &str, piece: usize) -> Vec<Bytes> {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "model": "fake-model",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Bytes::from(format!("data: {c}\n\n"))
    };
    let piece = if piece == 0 { text.len() } else { piece };
    let mut out: Vec<Bytes> = text
        .as_bytes()
        .chunks(piece)
        .map(|p| {
            chunk(
                json!({"content": std::str::from_utf8(p).expect("ASCII")}),
                Value::Null,
            )
        })
        .collect();
    out.push(chunk(json!({}), json!("stop")));
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "model": "fake-model",
                       "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": text.len() / 4}});
    out.push(Bytes::from(format!("data: {usage}\n\n")));
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    out
}

#[tokio::main]
async fn main() {
    let args = callai_bench::args();
    let bytes: usize = callai_bench::arg(&args, "bytes", 1 << 20);
    let piece: usize = callai_bench::arg(&args, "piece", 100);
    let port: u16 = callai_bench::arg(&args, "port", 0);
    let text = text(bytes, !args.contains_key("no-space"));
    let stream: Arc<Vec<Bytes>> = Arc::new(events(&text, piece));
    let whole = json!({"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": bytes / 4}})
    .to_string();
    let reply = move |body: Bytes| {
        let (stream, whole) = (stream.clone(), whole.clone());
        async move {
            let streamed =
                serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["stream"] == json!(true));
            if !streamed {
                return ([("content-type", "application/json")], Body::from(whole));
            }
            let frames = futures_util::stream::iter(
                (0..stream.len())
                    .map(move |i| Ok::<_, std::convert::Infallible>(stream[i].clone())),
            );
            (
                [("content-type", "text/event-stream")],
                Body::from_stream(frames),
            )
        }
    };
    let app = Router::new().route("/v1/chat/completions", post(reply));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    eprintln!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.expect("serve");
}

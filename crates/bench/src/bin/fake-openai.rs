//! A loopback OpenAI-compatible chat-completions server that answers every
//! request with the same valid JSON object after `--delay-ms` (20 by
//! default). Prints `listening on http://ADDR` once it accepts. With
//! `--hold N` the first N requests are held for ten minutes; with `--log`
//! it prints `request MS` (ms since the Unix epoch) on stdout as each
//! request arrives. With `--tls-ca FILE` it speaks TLS (HTTP/2 or
//! HTTP/1.1 by ALPN, 100 streams a connection) with a certificate of a CA
//! it makes and writes to FILE, and prints `listening on https://ADDR`.

use axum::Router;
use axum::routing::post;
use serde_json::json;
use std::time::Duration;

#[tokio::main]
async fn main() {
    let args = callai_bench::args();
    let delay = Duration::from_millis(callai_bench::arg(&args, "delay-ms", 20));
    let port: u16 = callai_bench::arg(&args, "port", 0);
    let hold: u64 = callai_bench::arg(&args, "hold", 0);
    let log = args.contains_key("log");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "{\"scene\": \"Rain on the window; she did not look up.\"}"},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 20, "completion_tokens": 14, "total_tokens": 34}
    })
    .to_string();
    let reply = move || {
        let body = body.clone();
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if log {
            println!("request {}", callai_engine::events::now_ms());
        }
        async move {
            let wait = if n < hold {
                Duration::from_secs(600)
            } else {
                delay
            };
            tokio::time::sleep(wait).await;
            ([("content-type", "application/json")], body)
        }
    };
    let app = Router::new().route("/v1/chat/completions", post(reply));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    let addr = listener.local_addr().unwrap();
    if let Some(ca_file) = args.get("tls-ca") {
        let acceptor = callai_bench::tls::acceptor(std::path::Path::new(ca_file));
        eprintln!("listening on https://{addr}");
        return callai_bench::tls::serve(listener, app, acceptor).await;
    }
    eprintln!("listening on http://{addr}");
    axum::serve(listener, app).await.expect("serve");
}

//! A fake model provider on loopback that speaks HTTP/1.1 and answers from a
//! script: canned JSON shaped like the providers' documented responses, or
//! a fault (a delay past the client's timeout, a reset, a body cut short).

use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json(u16, Value, Vec<(&'static str, String)>),
    /// A raw body (e.g. not JSON) with a status.
    Raw(u16, String),
    /// Waits, then answers.
    Delay(Duration, Box<Reply>),
    /// Waits until the gate opens, then answers.
    Gated(Gate, Box<Reply>),
    /// Closes the connection without a response.
    Reset,
    /// Declares a longer body than it sends, then closes.
    Truncated(String),
    /// A redirect to `location`, with this status.
    Redirect(u16, String),
    /// A 200 whose chunked body streams `bytes` bytes of JSON-ish filler,
    /// for as long as the client reads.
    Huge(u64),
    /// A 200 `text/event-stream`: each event (an optional name, its data)
    /// written after `pause`; then the stream ends, or, when `cut`, the
    /// connection closes without ending it.
    Events {
        /// The events.
        events: Vec<(Option<String>, String)>,
        /// The pause before each.
        pause: Duration,
        /// Whether the stream is cut off after the last event.
        cut: bool,
    },
}

impl Reply {
    /// 200 with a JSON body.
    pub fn ok(body: Value) -> Self {
        Self::Json(200, body, vec![])
    }

    /// A mock script (the design's format) as an OpenAI-compatible server
    /// answers it: each reply's content, finish reason and usage.
    pub fn openai_script(script: &str) -> Vec<Self> {
        let script: Vec<Value> = serde_json::from_str(script).expect("a mock script");
        script
            .iter()
            .map(|e| {
                Self::ok(serde_json::json!({
                    "model": "fake",
                    "choices": [{"index": 0,
                                 "message": {"role": "assistant", "content": e["content"]},
                                 "finish_reason": e.get("finishReason").cloned().unwrap_or("stop".into())}],
                    "usage": {"prompt_tokens": e["inputTokens"], "completion_tokens": e["outputTokens"]}
                }))
            })
            .collect()
    }
}

/// A gate that holds the requests of a [`Reply::Gated`] until it opens:
/// so that a test can have every call in flight at once.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<(std::sync::atomic::AtomicBool, tokio::sync::Notify)>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens it: every request held goes on, and later ones pass.
    pub fn open(&self) {
        self.0.0.store(true, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    async fn passed(&self) {
        loop {
            let opened = self.0.1.notified();
            if self.0.0.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }
}

/// A short Chat Completions answer: `ok`, 5 input and 3 output tokens.
pub fn short_completion() -> Value {
    serde_json::json!({"model": "m", "usage": {"prompt_tokens": 5, "completion_tokens": 3},
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                    "finish_reason": "stop"}]})
}

/// The Book AI pack's truncation-and-violation script (three calls), as an
/// OpenAI-compatible server answers it.
pub fn bookai_replies() -> Vec<Reply> {
    Reply::openai_script(include_str!(
        "../examples/bookai-scene/scripts/truncation-and-violation.json"
    ))
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: HashMap<String, String>,
    /// The JSON body.
    pub body: Value,
}

impl Received {
    /// The text of the last message the request carried, whichever API
    /// (a string, or its content blocks as JSON text).
    pub fn last_text(&self) -> String {
        let last = self.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .expect("a request with messages");
        match &last["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// The running fake.
#[derive(Debug)]
pub struct FakeServer {
    url: String,
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    sent: Arc<AtomicU64>,
}

impl FakeServer {
    /// Starts serving `replies` in order on a loopback port; a request past
    /// the end gets a 599.
    pub async fn start(replies: Vec<Reply>) -> Self {
        Self::serving(replies, Past::Exhausted).await
    }

    /// Answers every request with `reply`, however many come.
    pub async fn repeating(reply: Reply) -> Self {
        Self::serving(vec![reply], Past::Last).await
    }

    async fn serving(replies: Vec<Reply>, past: Past) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicU64::new(0));
        let (log, counter) = (received.clone(), sent.clone());
        tokio::spawn(async move {
            let replies = Arc::new(replies);
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (replies, log, counter) = (replies.clone(), log.clone(), counter.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &replies, past, &log, &counter).await;
                });
            }
        });
        Self {
            url,
            port,
            received,
            sent,
        }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many requests it has received.
    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// Waits until it has received `n` requests, failing the test after
    /// 10 s: a call the test started has reached the provider.
    pub async fn reached(&self, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.count() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{n} requests never reached the provider ({} did)",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Body bytes the fake has written so far, over every response.
    pub fn body_bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The base URL, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it received, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// What a request past the script gets.
#[derive(Debug, Clone, Copy)]
enum Past {
    /// A 599.
    Exhausted,
    /// The last reply again.
    Last,
}

/// Reads one request: its path, headers and JSON body (`null` when none);
/// `None` when the client closed before a whole head.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Received>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.lines();
    let path = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[header_end..]).unwrap_or(Value::Null);
    Ok(Some(Received {
        path,
        headers,
        body,
    }))
}

async fn serve(
    mut stream: TcpStream,
    replies: &[Reply],
    past: Past,
    log: &Mutex<Vec<Received>>,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    let Some(received) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let index = {
        let mut log = log.lock().unwrap();
        log.push(received);
        log.len() - 1
    };
    let index = match past {
        Past::Last => index.min(replies.len().saturating_sub(1)),
        Past::Exhausted => index,
    };
    let mut reply = replies
        .get(index)
        .cloned()
        .unwrap_or(Reply::Raw(599, "script exhausted".into()));
    let reply = loop {
        reply = match reply {
            Reply::Delay(d, next) => {
                tokio::time::sleep(d).await;
                *next
            }
            Reply::Gated(gate, next) => {
                gate.passed().await;
                *next
            }
            other => break other,
        };
    };
    let (status, body, extra) = match reply {
        Reply::Json(s, b, h) => (s, b.to_string(), h),
        Reply::Raw(s, b) => (s, b, vec![]),
        Reply::Reset => return Ok(()),
        Reply::Truncated(b) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                b.len() + 100
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(b.as_bytes()).await?;
            return stream.shutdown().await;
        }
        Reply::Redirect(status, location) => {
            let head = format!(
                "HTTP/1.1 {status} Moved\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            return stream.shutdown().await;
        }
        reply @ (Reply::Huge(_) | Reply::Events { .. }) => {
            return stream_reply(&mut stream, reply, sent).await;
        }
        Reply::Delay(..) | Reply::Gated(..) => unreachable!(),
    };
    let mut head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    sent.fetch_add(body.len() as u64, Ordering::Relaxed);
    stream.shutdown().await
}

/// A reply written as it goes: a huge body, or server-sent events.
async fn stream_reply(
    stream: &mut TcpStream,
    reply: Reply,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    match reply {
        Reply::Huge(bytes) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            let chunk = "{\"x\": 1}, ".repeat(6554);
            let mut left = bytes;
            while left > 0 {
                let piece = &chunk[..chunk.len().min(left as usize)];
                stream
                    .write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
                    .await?;
                sent.fetch_add(piece.len() as u64, Ordering::Relaxed);
                left -= piece.len() as u64;
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.shutdown().await
        }
        Reply::Events { events, pause, cut } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            for (name, data) in events {
                tokio::time::sleep(pause).await;
                let mut frame = String::new();
                if let Some(name) = name {
                    frame.push_str(&format!("event: {name}\n"));
                }
                frame.push_str(&format!("data: {data}\n\n"));
                let chunk = format!("{:x}\r\n{frame}\r\n", frame.len());
                if stream.write_all(chunk.as_bytes()).await.is_err() {
                    return Ok(());
                }
                sent.fetch_add(frame.len() as u64, Ordering::Relaxed);
            }
            if !cut {
                stream.write_all(b"0\r\n\r\n").await?;
            }
            stream.shutdown().await
        }
        _ => unreachable!("only streamed replies"),
    }
}

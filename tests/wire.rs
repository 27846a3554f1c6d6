//! The harness for the HTTP adapters' tests: each API's wire shapes, and a
//! call through the engine against the loopback fake.

use crate::NoWait;
use crate::fake_server::{FakeServer, Received, Reply};
use callai_config::Config;
use callai_engine::wire::{CallError, CallRequest, CallResult, RetryField};
use callai_engine::{Event, EventLog, Host};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const KEY: &str = "sk-test-SUPERSECRET-0248";

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

pub const APIS: [Api; 2] = [Api::OpenAi, Api::Anthropic];

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    pub fn config(self, url: &str, native: bool, timeout_ms: u64) -> Config {
        let toml = format!(
            "[defaults]\nprovider = \"{n}\"\n[providers.{n}]\nbaseUrl = \"{url}\"\napiKeyEnv = \"CALLAI_TEST_KEY\"\nmodel = \"m-1\"\nnative = {native}\ntimeoutMs = {timeout_ms}\n",
            n = self.name()
        );
        Config::from_toml(&toml).unwrap()
    }

    pub fn usage(self, out: Option<u32>) -> Option<Value> {
        out.map(|o| match self {
            Api::OpenAi => {
                json!({"prompt_tokens": 11, "completion_tokens": o, "total_tokens": 11 + o})
            }
            Api::Anthropic => json!({"input_tokens": 11, "output_tokens": o}),
        })
    }

    /// A reply carrying `text` (or, natively structured, `data`) that stopped for `stop`.
    pub fn reply(self, text: &str, data: Option<Value>, stop: &str, out: Option<u32>) -> Reply {
        let mut body = match self {
            Api::OpenAi => {
                let reason = stop;
                json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m-1",
                       "choices": [{"index": 0, "message": {"role": "assistant",
                           "content": data.as_ref().map_or(text.to_owned(), Value::to_string), "refusal": null},
                           "finish_reason": reason}]})
            }
            Api::Anthropic => {
                let reason = match stop {
                    "stop" if data.is_some() => "tool_use",
                    "stop" => "end_turn",
                    "length" => "max_tokens",
                    other => other,
                };
                let block = match &data {
                    Some(d) => {
                        json!({"type": "tool_use", "id": "toolu_1", "name": "respond", "input": d})
                    }
                    None => json!({"type": "text", "text": text}),
                };
                json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m-1",
                       "content": [block], "stop_reason": reason})
            }
        };
        if let Some(u) = self.usage(out) {
            body["usage"] = u;
        }
        Reply::ok(body)
    }

    /// A reply that calls tools: each `(id, name, arguments)`, arguments as
    /// the JSON text the model wrote (an Anthropic `input` must be an
    /// object: text that is not one goes as a string).
    pub fn tool_reply(self, text: &str, calls: &[(&str, &str, &str)], out: Option<u32>) -> Reply {
        let mut body = match self {
            Api::OpenAi => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function",
                               "function": {"name": name, "arguments": args}})
                    })
                    .collect();
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                };
                json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m-1",
                       "choices": [{"index": 0, "message": {"role": "assistant",
                           "content": content, "tool_calls": calls, "refusal": null},
                           "finish_reason": "tool_calls"}]})
            }
            Api::Anthropic => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                blocks.extend(calls.iter().map(|(id, name, args)| {
                    let input = serde_json::from_str::<Value>(args).unwrap_or_else(|_| json!(args));
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }));
                json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m-1",
                       "content": blocks, "stop_reason": "tool_use"})
            }
        };
        if let Some(u) = self.usage(out) {
            body["usage"] = u;
        }
        Reply::ok(body)
    }

    /// A streamed reply: `pieces` of text, then the stop and the usage, as
    /// the API streams them, each after `pause`.
    pub fn stream_reply(
        self,
        pieces: &[&str],
        stop: &str,
        out: Option<u32>,
        pause: Duration,
    ) -> Reply {
        let events: Vec<(Option<String>, String)> = match self {
            Api::OpenAi => {
                let chunk = |delta: Value, finish: Value| {
                    json!({"id": "c1", "object": "chat.completion.chunk", "model": "m-1",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                };
                let mut e = vec![chunk(
                    json!({"role": "assistant", "content": ""}),
                    Value::Null,
                )];
                e.extend(
                    pieces
                        .iter()
                        .map(|p| chunk(json!({"content": p}), Value::Null)),
                );
                e.push(chunk(json!({}), json!(stop)));
                if let Some(u) = self.usage(out) {
                    e.push(
                        json!({"id": "c1", "object": "chat.completion.chunk", "model": "m-1",
                                  "choices": [], "usage": u}),
                    );
                }
                let mut frames: Vec<(Option<String>, String)> =
                    e.into_iter().map(|v| (None, v.to_string())).collect();
                frames.push((None, "[DONE]".into()));
                frames
            }
            Api::Anthropic => {
                let reason = match stop {
                    "length" => "max_tokens",
                    _ => "end_turn",
                };
                let mut e = vec![
                    (
                        "message_start",
                        json!({"type": "message_start", "message": {"id": "m", "type": "message",
                        "role": "assistant", "model": "m-1", "content": [], "usage": {"input_tokens": 11, "output_tokens": 1}}}),
                    ),
                    (
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
                    ),
                ];
                e.extend(pieces.iter().map(|p| {
                    (
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                    "index": 0, "delta": {"type": "text_delta", "text": p}}),
                    )
                }));
                e.push((
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ));
                let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": reason}});
                if let Some(o) = out {
                    delta["usage"] = json!({"output_tokens": o});
                }
                e.push(("message_delta", delta));
                e.push(("message_stop", json!({"type": "message_stop"})));
                e.into_iter()
                    .map(|(n, v)| (Some(n.to_owned()), v.to_string()))
                    .collect()
            }
        };
        Reply::Events {
            events,
            pause,
            cut: false,
        }
    }

    pub fn refusal(self) -> Reply {
        match self {
            Api::OpenAi => Reply::ok(
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "refusal": "I can't help with that."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 6}}),
            ),
            Api::Anthropic => Reply::ok(
                json!({"content": [{"type": "text", "text": "I can't help with that."}],
                "stop_reason": "refusal", "usage": {"input_tokens": 5, "output_tokens": 6}}),
            ),
        }
    }

    pub fn max_tokens(self, r: &Received) -> u64 {
        r.body["max_tokens"].as_u64().unwrap()
    }

    pub fn path(self) -> &'static str {
        match self {
            Api::OpenAi => "/v1/chat/completions",
            Api::Anthropic => "/v1/messages",
        }
    }

    pub fn key_header(self, r: &Received) -> Option<String> {
        match self {
            Api::OpenAi => r.headers.get("authorization").cloned(),
            Api::Anthropic => r.headers.get("x-api-key").map(|k| format!("Bearer {k}")),
        }
    }

    pub fn native_in(self, r: &Received) -> bool {
        match self {
            Api::OpenAi => r.body.get("response_format").is_some(),
            Api::Anthropic => r.body.get("tool_choice").is_some(),
        }
    }

    pub fn system_of(self, r: &Received) -> String {
        match self {
            Api::OpenAi => r.body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            Api::Anthropic => r.body["system"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

/// One call's outcome, events, the requests the fake received, and its wall time.
#[derive(Debug)]
pub struct Call {
    pub outcome: Result<CallResult, CallError>,
    pub events: Vec<Event>,
    pub received: Vec<Received>,
    pub elapsed: Duration,
    /// The backoff waits the engine asked for (none were waited out).
    pub waits: Vec<Duration>,
}

impl Call {
    pub fn ok(&self) -> &CallResult {
        self.outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("the call failed: {e}"))
    }
    pub fn err(&self) -> &CallError {
        self.outcome.as_ref().expect_err("the call should fail")
    }
    /// The key must appear in the requests' auth header and nowhere else.
    pub fn assert_no_secret(&self) {
        let shown = format!(
            "{} {}",
            serde_json::to_string(&self.events).unwrap(),
            match &self.outcome {
                Ok(r) => r.to_json().to_string(),
                Err(e) => e.to_json().to_string(),
            }
        );
        assert!(!shown.contains(KEY), "the key leaked: {shown}");
    }
}

/// The host of `config`, its provider's key read from [`KEY`], its backoff
/// waits recorded by `sleeper` instead of waited.
pub fn host_sleeping(config: Config, sleeper: Arc<NoWait>) -> Host {
    config
        .host_builder(&|var| (var == "CALLAI_TEST_KEY").then(|| KEY.to_owned()))
        .unwrap()
        .sleeper(sleeper)
        .build()
        .unwrap()
}

/// [`host_sleeping`] with a sleeper of its own.
pub fn host(config: Config) -> Host {
    host_sleeping(config, Arc::default())
}

pub fn schema() -> Value {
    json!({"type": "object", "required": ["scene"], "properties": {"scene": {"type": "string"}}})
}

pub async fn call(
    api: Api,
    replies: Vec<Reply>,
    request: Value,
    native: bool,
    timeout_ms: u64,
) -> Call {
    let fake = FakeServer::start(replies).await;
    let sleeper = Arc::new(NoWait::default());
    let host = host_sleeping(api.config(fake.url(), native, timeout_ms), sleeper.clone());
    let events = EventLog::new();
    let request = CallRequest::from_value(&request, RetryField::Honoured).unwrap();
    let start = Instant::now();
    let outcome = host.call("provider.test", &request, &events).await;
    let call = Call {
        outcome,
        events: events.take(),
        received: fake.received(),
        elapsed: start.elapsed(),
        waits: sleeper.waits(),
    };
    call.assert_no_secret();
    for r in &call.received {
        assert_eq!(r.path, api.path());
        assert_eq!(
            api.key_header(r).as_deref(),
            Some(format!("Bearer {KEY}").as_str()),
            "{:?}",
            r.headers
        );
        if api == Api::Anthropic {
            assert_eq!(
                r.headers.get("anthropic-version").map(String::as_str),
                Some("2023-06-01")
            );
        }
    }
    call
}

pub fn text_request() -> Value {
    json!({"systemPrompt": "Be brief.", "messages": [{"role": "user", "content": "hi"}], "maxTokens": 100})
}

/// The error [`text_request`] fails with on `host`.
pub async fn failed_text_call(host: &Host) -> CallError {
    let request = CallRequest::from_value(&text_request(), RetryField::Honoured).unwrap();
    host.call("n", &request, &EventLog::new())
        .await
        .expect_err("the call fails")
}

pub fn scene_request(max_tokens: u32) -> Value {
    json!({"messages": [{"role": "user", "content": "A scene."}], "maxTokens": max_tokens, "responseSchema": schema()})
}

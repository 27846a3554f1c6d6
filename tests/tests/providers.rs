//! Both HTTP adapters against a fake provider on loopback that speaks their
//! wire formats: the results, the attempts, and the requests the fake saw.

use callai_host::providers::from_config_with;
use callai_host::{
    CallError, CallRequest, CallResult, Engine, ErrorCode, Event, EventLog, HostConfig, Providers,
    StructuredMode,
};
use callai_tests::fake_server::{FakeServer, Received, Reply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-SUPERSECRET-0248";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Api {
    OpenAi,
    Anthropic,
}

const APIS: [Api; 2] = [Api::OpenAi, Api::Anthropic];

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    fn config(self, url: &str, native: bool, timeout_ms: u64) -> HostConfig {
        let toml = format!(
            "[defaults]\nprovider = \"{n}\"\n[providers.{n}]\nbaseUrl = \"{url}\"\napiKeyEnv = \"CALLAI_TEST_KEY\"\nmodel = \"m-1\"\nnative = {native}\ntimeoutMs = {timeout_ms}\n",
            n = self.name()
        );
        HostConfig::from_toml(&toml).unwrap()
    }

    fn usage(self, out: Option<u32>) -> Option<Value> {
        out.map(|o| match self {
            Api::OpenAi => {
                json!({"prompt_tokens": 11, "completion_tokens": o, "total_tokens": 11 + o})
            }
            Api::Anthropic => json!({"input_tokens": 11, "output_tokens": o}),
        })
    }

    /// A reply carrying `text` (or, natively structured, `data`) that stopped for `stop`.
    fn reply(self, text: &str, data: Option<Value>, stop: &str, out: Option<u32>) -> Reply {
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

    fn refusal(self) -> Reply {
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

    fn max_tokens(self, r: &Received) -> u64 {
        r.body["max_tokens"].as_u64().unwrap()
    }

    fn path(self) -> &'static str {
        match self {
            Api::OpenAi => "/v1/chat/completions",
            Api::Anthropic => "/v1/messages",
        }
    }

    fn key_header(self, r: &Received) -> Option<String> {
        match self {
            Api::OpenAi => r.headers.get("authorization").cloned(),
            Api::Anthropic => r.headers.get("x-api-key").map(|k| format!("Bearer {k}")),
        }
    }

    fn native_in(self, r: &Received) -> bool {
        match self {
            Api::OpenAi => r.body.get("response_format").is_some(),
            Api::Anthropic => r.body.get("tool_choice").is_some(),
        }
    }

    fn system_of(self, r: &Received) -> String {
        match self {
            Api::OpenAi => r.body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            Api::Anthropic => r.body["system"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

struct Call {
    outcome: Result<CallResult, CallError>,
    events: Vec<Event>,
    received: Vec<Received>,
    elapsed: Duration,
}

impl Call {
    fn ok(&self) -> &CallResult {
        self.outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("the call failed: {e}"))
    }
    fn err(&self) -> &CallError {
        self.outcome.as_ref().expect_err("the call should fail")
    }
    /// The key must appear in the requests' auth header and nowhere else.
    fn assert_no_secret(&self) {
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

fn schema() -> Value {
    json!({"type": "object", "required": ["scene"], "properties": {"scene": {"type": "string"}}})
}

async fn call(
    api: Api,
    replies: Vec<Reply>,
    request: Value,
    native: bool,
    timeout_ms: u64,
) -> Call {
    let fake = FakeServer::start(replies).await;
    let config = api.config(fake.url(), native, timeout_ms);
    let mut providers = Providers::new();
    for p in from_config_with(&config, &|var| {
        (var == "CALLAI_TEST_KEY").then(|| KEY.to_owned())
    })
    .unwrap()
    {
        providers.insert(p);
    }
    let engine = Engine::new(Arc::new(config), providers);
    let events = EventLog::new();
    let request = CallRequest::from_value(&request, true).unwrap();
    let start = Instant::now();
    let outcome = engine.call("provider.test", &request, &events).await;
    let call = Call {
        outcome,
        events: events.take(),
        received: fake.received(),
        elapsed: start.elapsed(),
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

fn text_request() -> Value {
    json!({"systemPrompt": "Be brief.", "messages": [{"role": "user", "content": "hi"}], "maxTokens": 100})
}

fn scene_request(max_tokens: u32) -> Value {
    json!({"messages": [{"role": "user", "content": "A scene."}], "maxTokens": max_tokens, "responseSchema": schema()})
}

#[tokio::test]
async fn success_text() {
    for api in APIS {
        let c = call(
            api,
            vec![api.reply("Hello!", None, "stop", Some(3))],
            text_request(),
            true,
            5000,
        )
        .await;
        let r = c.ok();
        assert_eq!(r.content.as_deref(), Some("Hello!"));
        assert_eq!(r.usage.unwrap().output_tokens, Some(3));
        assert_eq!(r.usage.unwrap().input_tokens, Some(11));
        assert_eq!(r.attempts.unwrap().count, 1);
        let body = &c.received[0].body;
        assert_eq!(body["model"], "m-1");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(api.system_of(&c.received[0]), "Be brief.");
        assert!(
            !api.native_in(&c.received[0]),
            "{api:?}: a text call asks for no schema"
        );
    }
}

#[tokio::test]
async fn truncation_then_success_doubles_the_budget_in_the_second_body() {
    for api in APIS {
        let c = call(
            api,
            vec![
                api.reply("{\"scene\": \"it was", None, "length", Some(2000)),
                api.reply("", Some(json!({"scene": "ok"})), "stop", Some(1800)),
            ],
            scene_request(2000),
            true,
            5000,
        )
        .await;
        let a = c.ok().attempts.unwrap();
        assert_eq!(
            (a.count, a.output_tokens, a.usage_complete),
            (2, Some(3800), true),
            "{api:?}"
        );
        assert_eq!(a.structured_output, Some(StructuredMode::Native));
        assert_eq!(c.ok().data, Some(json!({"scene": "ok"})));
        assert_eq!(
            c.received
                .iter()
                .map(|r| api.max_tokens(r))
                .collect::<Vec<_>>(),
            [2000, 4000]
        );
        assert!(c.received.iter().all(|r| api.native_in(r)));
    }
}

#[tokio::test]
async fn schema_violation_then_success_sends_a_corrective_instruction() {
    for api in APIS {
        let c = call(
            api,
            vec![
                api.reply("", Some(json!({"title": "no scene"})), "stop", Some(5)),
                api.reply("", Some(json!({"scene": "ok"})), "stop", Some(6)),
            ],
            scene_request(300),
            true,
            5000,
        )
        .await;
        assert_eq!(c.ok().attempts.unwrap().count, 2);
        let second = c.received[1].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(second["role"], "user");
        assert!(
            second["content"]
                .as_str()
                .unwrap()
                .contains("could not be used"),
            "{second}"
        );
        assert_eq!(api.max_tokens(&c.received[1]), 300, "budget unchanged");
    }
}

#[tokio::test]
async fn refusal_is_not_retried() {
    for api in APIS {
        let c = call(
            api,
            vec![
                api.refusal(),
                api.reply("", Some(json!({"scene": "x"})), "stop", Some(1)),
            ],
            scene_request(300),
            true,
            5000,
        )
        .await;
        assert_eq!(c.err().code, ErrorCode::EnvelopeRefusal, "{api:?}");
        assert_eq!(c.received.len(), 1);
    }
}

#[tokio::test]
async fn missing_usage_is_incomplete_never_zero() {
    for api in APIS {
        let c = call(
            api,
            vec![api.reply("Hi", None, "stop", None)],
            text_request(),
            true,
            5000,
        )
        .await;
        let a = c.ok().attempts.unwrap();
        assert_eq!(
            (a.output_tokens, a.usage_complete),
            (None, false),
            "{api:?}"
        );
        assert_eq!(c.ok().usage, None);
    }
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    for api in APIS {
        let limited = Reply::Json(
            429,
            json!({"error": {"message": "rate limited"}}),
            vec![("retry-after", "1".into())],
        );
        let c = call(
            api,
            vec![limited, api.reply("Hi", None, "stop", Some(2))],
            text_request(),
            true,
            5000,
        )
        .await;
        let a = c.ok().attempts.unwrap();
        assert_eq!(
            (a.count, a.output_tokens, a.usage_complete),
            (2, Some(2), false)
        );
        assert!(
            c.elapsed >= Duration::from_millis(950),
            "retry-after honoured: {:?}",
            c.elapsed
        );
        assert_eq!(
            c.events
                .iter()
                .filter(|e| e.type_name() == "provider.usage")
                .count(),
            2
        );
    }
}

#[tokio::test]
async fn a_500_is_retried_until_exhausted() {
    for api in APIS {
        let boom = || Reply::Json(500, json!({"error": {"message": "internal"}}), vec![]);
        let c = call(
            api,
            vec![boom(), boom(), boom(), boom()],
            text_request(),
            true,
            5000,
        )
        .await;
        assert_eq!(c.err().code, ErrorCode::ProviderUnavailable);
        assert_eq!(c.received.len(), 3);
        assert_eq!(c.err().details.as_ref().unwrap()["totalAttempts"], 3);
        assert!(c.err().message.contains("500"), "{}", c.err().message);
    }
}

#[tokio::test]
async fn a_timeout_is_a_counted_transient_failure() {
    for api in APIS {
        let slow = || {
            Reply::Delay(
                Duration::from_millis(1500),
                Box::new(api.reply("late", None, "stop", Some(1))),
            )
        };
        let c = call(api, vec![slow(), slow(), slow()], text_request(), true, 200).await;
        assert_eq!(c.err().code, ErrorCode::ProviderUnavailable);
        assert!(
            c.err().message.contains("timed out after 200 ms"),
            "{}",
            c.err().message
        );
        assert_eq!(c.received.len(), 3);
    }
}

#[tokio::test]
async fn malformed_reset_and_cut_bodies_are_transient() {
    for api in APIS {
        let c = call(
            api,
            vec![
                Reply::Raw(200, "{this is not json".into()),
                Reply::Reset,
                Reply::Truncated("{\"choices\": [".into()),
                api.reply("fine", None, "stop", Some(1)),
            ],
            json!({"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 16}}),
            true,
            5000,
        )
        .await;
        // The host ceiling of 3 requests is reached before the good reply.
        assert_eq!(c.err().code, ErrorCode::ProviderUnavailable, "{api:?}");
        assert_eq!(c.received.len(), 3);
        let attempted: Vec<&Event> = c
            .events
            .iter()
            .filter(|e| e.type_name() == "envelope.retry.attempted")
            .collect();
        assert_eq!(attempted.len(), 2);
        assert!(
            format!("{attempted:?}").contains("not valid JSON"),
            "{attempted:?}"
        );
    }
}

#[tokio::test]
async fn a_4xx_is_rejected_at_once_and_the_key_stays_out_of_the_error() {
    for api in APIS {
        let echoing = Reply::Json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
            vec![],
        );
        let c = call(
            api,
            vec![echoing, api.reply("x", None, "stop", Some(1))],
            text_request(),
            true,
            5000,
        )
        .await;
        assert_eq!(c.err().code, ErrorCode::ProviderRejected);
        assert_eq!(c.received.len(), 1);
        assert!(
            c.err().message.contains("[redacted]"),
            "{}",
            c.err().message
        );
    }
}

#[tokio::test]
async fn a_rejected_native_mode_falls_back_to_the_prompt() {
    for api in APIS {
        let rejection = match api {
            Api::OpenAi => "response_format json_schema is not supported by this model",
            Api::Anthropic => "tool_choice is not supported by this model",
        };
        let c = call(
            api,
            vec![
                Reply::Json(400, json!({"error": {"message": rejection}}), vec![]),
                api.reply("{\"scene\": \"ok\"}", None, "stop", Some(4)),
            ],
            scene_request(300),
            true,
            5000,
        )
        .await;
        let a = c.ok().attempts.unwrap();
        assert_eq!(
            (a.count, a.structured_output),
            (2, Some(StructuredMode::Prompt)),
            "{api:?}"
        );
        assert!(api.native_in(&c.received[0]) && !api.native_in(&c.received[1]));
        assert!(
            api.system_of(&c.received[1])
                .contains("\"required\":[\"scene\"]"),
            "the schema is in the prompt"
        );
    }
}

#[tokio::test]
async fn native_false_uses_prompt_mode_from_the_start() {
    for api in APIS {
        let c = call(
            api,
            vec![api.reply("```json\n{\"scene\": \"ok\"}\n```", None, "stop", Some(4))],
            scene_request(300),
            false,
            5000,
        )
        .await;
        assert_eq!(
            c.ok().attempts.unwrap().structured_output,
            Some(StructuredMode::Prompt)
        );
        assert!(!api.native_in(&c.received[0]));
        assert!(api.system_of(&c.received[0]).contains("JSON Schema"));
    }
}

#[test]
fn a_missing_key_is_an_error_at_start_up_naming_the_variable() {
    for api in APIS {
        let config = api.config("http://127.0.0.1:9/v1", true, 1000);
        let err = from_config_with(&config, &|_| None).err().expect("refused");
        assert!(err.to_string().contains("CALLAI_TEST_KEY"), "{err}");
        assert!(err.to_string().contains(api.name()), "{err}");
    }
}

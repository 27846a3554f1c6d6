//! Both HTTP adapters when the provider fails: rate limits, server errors,
//! timeouts, broken bodies, rejections, native mode refused, missing keys.

use callai_engine::Event;
use callai_engine::wire::{ErrorCode, StructuredOutput};
use callai_tests::fake_server::Reply;
use callai_tests::wire::{APIS, Api, KEY, call, scene_request, text_request};
use serde_json::json;
use std::time::Duration;

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
        assert_eq!(
            c.waits,
            [Duration::from_secs(1)],
            "retry-after honoured, exactly"
        );
        assert!(
            c.elapsed < Duration::from_millis(900),
            "and not waited out in the test: {:?}",
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
        // Full jitter: each wait under its doubling ceiling (500 ms, then 1 s).
        assert_eq!(c.waits.len(), 2, "{:?}", c.waits);
        assert!(
            c.waits[0] < Duration::from_millis(500) && c.waits[1] < Duration::from_secs(1),
            "{:?}",
            c.waits
        );
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
            (2, Some(StructuredOutput::Prompt)),
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
            Some(StructuredOutput::Prompt)
        );
        assert!(!api.native_in(&c.received[0]));
        assert!(api.system_of(&c.received[0]).contains("JSON Schema"));
    }
}

#[test]
fn a_missing_key_is_an_error_at_start_up_naming_the_variable() {
    for api in APIS {
        let config = api.config("http://127.0.0.1:9/v1", true, 1000);
        let err = config
            .host_builder(&|_| None)
            .and_then(|b| b.build())
            .expect_err("refused");
        assert_eq!(
            err.key(),
            Some(format!("providers.{}.apiKeyEnv", api.name()).as_str())
        );
        assert!(err.to_string().contains("CALLAI_TEST_KEY"), "{err}");
        assert!(err.to_string().contains(api.name()), "{err}");
    }
}

#[tokio::test]
async fn a_provider_that_cannot_be_reached_is_retried_but_never_counted() {
    // Issue 22, item 9 (§A.1): a connection refused before any byte of the
    // request was written is no attempt. A closed loopback port stands for
    // an unreachable provider.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    for api in APIS {
        let sleeper = std::sync::Arc::new(callai_tests::NoWait::default());
        let host = callai_tests::wire::host_sleeping(api.config(&url, true, 5000), sleeper.clone());
        let events = callai_engine::EventLog::new();
        let request = callai_engine::wire::CallRequest::from_value(
            &text_request(),
            callai_engine::wire::RetryField::Honoured,
        )
        .unwrap();
        let error = host
            .call("provider.test", &request, &events)
            .await
            .expect_err("nothing answers");
        assert_eq!(error.code, ErrorCode::ProviderUnavailable, "{api:?}");
        assert!(
            error.message.contains("could not connect"),
            "{}",
            error.message
        );
        let total = error
            .details
            .as_ref()
            .and_then(|d| d.get("totalAttempts"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        assert_eq!(
            total, 0,
            "{api:?}: no request reached a provider: {error:?}"
        );
        let names: Vec<&str> = events.snapshot().iter().map(|e| e.type_name()).collect();
        assert!(
            !names.contains(&"provider.usage") && !names.contains(&"envelope.retry.exhausted"),
            "{api:?}: {names:?}"
        );
        // Retried under the transient backoff, up to the call's cap.
        assert_eq!(sleeper.waits().len(), 2, "{api:?}: {:?}", sleeper.waits());
    }
}

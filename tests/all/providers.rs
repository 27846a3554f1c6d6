//! Both HTTP adapters against a fake provider on loopback that speaks their
//! wire formats: the happy paths and the envelope retries.

use callai_engine::wire::{ErrorCode, StructuredOutput};
use callai_tests::wire::{APIS, call, scene_request, text_request};
use serde_json::json;

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
        assert_eq!(a.structured_output, Some(StructuredOutput::Native));
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
async fn two_providers_of_one_kind_are_routed_by_name() {
    use callai_engine::EventLog;
    use callai_engine::wire::CallRequest;
    use callai_tests::fake_server::FakeServer;
    use callai_tests::wire::{Api, host};

    let api = Api::OpenAi;
    let cloud = FakeServer::start(vec![api.reply("from cloud", None, "stop", Some(1))]).await;
    let local = FakeServer::start(vec![api.reply("from local", None, "stop", Some(1))]).await;
    let config = callai_config::Config::from_toml(&format!(
        "[defaults]\nprovider = \"openai\"\n\
         [providers.openai]\nbaseUrl = \"{}\"\napiKeyEnv = \"CALLAI_TEST_KEY\"\n\
         [providers.local]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"llama3.1\"\n",
        cloud.url(),
        local.url()
    ))
    .unwrap();
    let host = host(config);
    let ask = |provider: Option<&str>| {
        let mut r = json!({"messages": [{"role": "user", "content": "hi"}]});
        if let Some(p) = provider {
            r["provider"] = p.into();
        }
        CallRequest::from_value(&r, callai_engine::wire::RetryField::Honoured).unwrap()
    };
    let events = EventLog::new();
    let a = host.call("n", &ask(None), &events).await.unwrap();
    let b = host.call("n", &ask(Some("local")), &events).await.unwrap();
    assert_eq!(a.content.as_deref(), Some("from cloud"));
    assert_eq!(b.content.as_deref(), Some("from local"));
    assert_eq!((cloud.received().len(), local.received().len()), (1, 1));
    // Each section's own settings: the key only to the one that has one,
    // the local model to the local server.
    assert!(cloud.received()[0].headers.contains_key("authorization"));
    assert!(!local.received()[0].headers.contains_key("authorization"));
    assert_eq!(local.received()[0].body["model"], "llama3.1");
    let providers: Vec<String> = events
        .snapshot()
        .iter()
        .map(|e| {
            e.to_json()["payload"]["provider"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(providers, ["openai", "local"]);
}

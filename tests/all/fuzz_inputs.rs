//! The fuzz targets' inputs and invariants (see `fuzz/`), as bounded
//! property tests so that every CI run exercises them: the request parser
//! and validator, lenient recovery, the mock script parser, the config parser.

use callai_engine::MockScript;
use callai_engine::fuzzing::{RecoveryPath, recover};
use callai_engine::wire::{CallRequest, ErrorCode, RetryField};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// JSON values built from the vocabulary the parsers look for, so that the
/// cases reach deep into them rather than failing at the first key.
fn json_value() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "messages",
        "role",
        "content",
        "retry",
        "maxAttempts",
        "growMaxTokens",
        "maxTokens",
        "temperature",
        "responseSchema",
        "type",
        "required",
        "stopSequences",
        "provider",
        "finishReason",
        "outputTokens",
        "inputTokens",
        "error",
        "status",
        "message",
        "user",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u32..20).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "system",
            "stop",
            "length",
            "object",
            "x",
            ""
        ])
        .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..5).prop_map(|kv| Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

/// Text: arbitrary strings, or JSON from the vocabulary, sometimes cut short.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,64}",
        json_value().prop_map(|v| v.to_string()),
        (json_value(), 0usize..64).prop_map(|(v, cut)| {
            let s = v.to_string();
            let cut = (0..=cut.min(s.len()))
                .rev()
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0);
            s[..cut].to_owned()
        }),
        (".{0,16}", json_value(), ".{0,16}")
            .prop_map(|(a, v, b)| format!("{a}```json\n{v}\n```{b}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn request_json_never_panics_and_refusals_name_a_field(input in text()) {
        for retry_field in [RetryField::Honoured, RetryField::Ignored] {
            match CallRequest::from_json(&input, retry_field) {
                Ok(request) => {
                    // What parsed is a request the host may act on, by the
                    // spec's own bounds (checked here, not by the parser).
                    prop_assert!(!request.messages.is_empty());
                    prop_assert!(request.temperature.is_none_or(|t| (0.0..=2.0).contains(&t)));
                    prop_assert!(request.max_tokens != Some(0));
                    let cap = request.retry.and_then(|r| r.max_attempts);
                    prop_assert!(cap.is_none_or(|n| (1..=16).contains(&n)));
                    prop_assert!(retry_field == RetryField::Honoured || request.retry.is_none());
                    let again = serde_json::to_string(&request).unwrap();
                    prop_assert_eq!(CallRequest::from_json(&again, retry_field).unwrap(), request);
                }
                Err(e) => {
                    prop_assert_eq!(e.code, ErrorCode::ValidationError);
                    prop_assert!(e.field().is_some(), "{}", e);
                }
            }
        }
    }

    #[test]
    fn recovery_never_panics_and_direct_means_strict(input in text()) {
        if let Ok((value, RecoveryPath::Direct)) = recover(&input) {
            prop_assert_eq!(serde_json::from_str::<Value>(input.trim()).unwrap(), value);
        }
    }

    #[test]
    fn mock_scripts_never_panic_and_round_trip(input in text()) {
        if let Ok(script) = MockScript::from_json(&input) {
            let again = serde_json::to_string(&script).unwrap();
            prop_assert_eq!(MockScript::from_json(&again).unwrap(), script);
        }
    }

    #[test]
    fn configs_never_panic_and_are_in_range(
        lines in prop::collection::vec(
            (prop::sample::select(vec!["[retry]", "[limits]", "[callAccounting]", "[mock]", "[policy]", "[providers.openai]", "[bogus]", ""]),
             prop::sample::select(vec!["maxRetryAttempts", "truncationBudgetMultiplier", "fuel", "memoryBytes", "attempts", "native", "allowedProviders", "timeoutMs", "nope"]),
             prop::sample::select(vec!["0", "1", "3", "17", "-1", "true", "\"x\"", "[\"mock\"]", "1e3", "99999999999"])),
            0..6)
    ) {
        let text: String = lines.iter().map(|(t, k, v)| format!("{t}\n{k} = {v}\n")).collect();
        if let Ok(config) = callai_config::Config::from_toml(&text) {
            // The documented ranges, checked here rather than by the parser.
            prop_assert!((1..=16).contains(&config.host.retry.max_retry_attempts));
            prop_assert!((1..=8).contains(&config.host.retry.truncation_budget_multiplier));
            prop_assert!(config.host.limits.fuel >= 1);
            prop_assert!((1 << 20..=4 << 30).contains(&config.host.limits.memory_bytes));
            prop_assert!(config.providers.values().all(|p| p.timeout_ms.is_none_or(|t| t >= 1)));
            // The keys the case set are what the config holds.
            for (table, key, value) in &lines {
                if *table == "[retry]" && *key == "maxRetryAttempts" && text.matches("[retry]").count() == 1 {
                    prop_assert_eq!(config.host.retry.max_retry_attempts.to_string(), *value);
                }
            }
        }
    }

    #[test]
    fn configs_from_arbitrary_text_never_panic(input in ".{0,80}") {
        let _ = callai_config::Config::from_toml(&input);
    }
}

//! API keys in each run-log backend (issue 53), under the `ApiKeyLog`
//! trait: the pepper made once and kept, every change moving the
//! generation on with its audit entry in the same write, a key replaced by
//! a second write of its id, a hash used by two keys refused, and when a
//! key was last used written without moving the generation.

use callai_engine::runlog::{ApiKey, ApiKeyEvent, ApiKeyLog};
use callai_tests::runlog_backends::Backend;

fn key(id: &str, hash: &str) -> ApiKey {
    ApiKey {
        id: id.into(),
        tenant: "team".into(),
        name: format!("key {id}"),
        hash: hash.into(),
        hint: "ck-0a1b2c".into(),
        settings: r#"{"limits":[]}"#.into(),
        expires_ms: Some(9_000_000),
        created_ms: 1_000,
        revoked_ms: None,
        last_used_ms: None,
    }
}

fn event(id: &str, action: &str, at_ms: u64) -> ApiKeyEvent {
    ApiKeyEvent {
        key_id: id.into(),
        at_ms,
        actor: "admin".into(),
        action: action.into(),
        detail: "{}".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_move_the_generation_on_and_keep_their_audit_list() {
    for backend in Backend::all() {
        let what = backend.name();
        let log = backend.open().await;
        let keys: &dyn ApiKeyLog = log.api_keys().expect("every backend keeps API keys");
        let (generation, pepper) = keys.api_key_state(&[7; 32]).await.unwrap();
        assert_eq!(
            (generation, pepper.as_slice()),
            (0, &[7u8; 32][..]),
            "{what}"
        );
        // The pepper is made once: a later fresh one is not taken.
        let (_, again) = keys.api_key_state(&[9; 32]).await.unwrap();
        assert_eq!(again, pepper, "{what}");

        keys.put_api_key(&key("key-a", "aa"), &event("key-a", "created", 1_000))
            .await
            .unwrap();
        keys.put_api_key(&key("key-b", "bb"), &event("key-b", "created", 1_001))
            .await
            .unwrap();
        let revoked = ApiKey {
            revoked_ms: Some(2_000),
            ..key("key-a", "aa")
        };
        keys.put_api_key(&revoked, &event("key-a", "revoked", 2_000))
            .await
            .unwrap();
        let (generation, _) = keys.api_key_state(&[9; 32]).await.unwrap();
        assert_eq!(generation, 3, "{what}: every change moves it on");
        let all = keys.api_keys().await.unwrap();
        assert_eq!(all, [revoked.clone(), key("key-b", "bb")], "{what}");
        let actions: Vec<String> = keys
            .api_key_events("key-a")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(actions, ["created", "revoked"], "{what}");

        // Another key with a hash already used is refused, and changes
        // nothing.
        let clash = keys
            .put_api_key(&key("key-c", "bb"), &event("key-c", "created", 3_000))
            .await;
        assert!(clash.is_err(), "{what}");
        assert_eq!(keys.api_keys().await.unwrap().len(), 2, "{what}");
        assert!(
            keys.api_key_events("key-c").await.unwrap().is_empty(),
            "{what}"
        );
        assert_eq!(keys.api_key_state(&[9; 32]).await.unwrap().0, 3, "{what}");

        // Last used: the latest written, the generation where it was.
        keys.touch_api_keys(&[("key-b".into(), 5_000)])
            .await
            .unwrap();
        keys.touch_api_keys(&[("key-b".into(), 4_000)])
            .await
            .unwrap();
        let b = keys.api_keys().await.unwrap().pop().unwrap();
        assert_eq!(b.last_used_ms, Some(5_000), "{what}");
        assert_eq!(keys.api_key_state(&[9; 32]).await.unwrap().0, 3, "{what}");
    }
}

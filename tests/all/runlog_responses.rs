//! Stored responses in each run-log backend (issue 52), under the
//! `ResponseLog` trait: kept and read back by their tenant only, replaced
//! by a second write of the same id, deleted once, and pruned by the time
//! they were kept, with the count `callai runlog prune` reports.

use callai_engine::runlog::{ResponseLog, StoredResponse};
use callai_tests::runlog_backends::Backend;

fn kept(id: &str, tenant: &str, created_ms: u64) -> StoredResponse {
    StoredResponse {
        id: id.into(),
        tenant: tenant.into(),
        created_ms,
        conversation: r#"[{"role":"user","content":"hi"}]"#.into(),
        input_items: r#"[{"role":"user","content":"hi"}]"#.into(),
        response: format!(r#"{{"id":"{id}","object":"response"}}"#),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_responses_are_their_tenants_and_pruned_by_age() {
    for backend in Backend::all() {
        let what = backend.name();
        let log = backend.open().await;
        let responses: &dyn ResponseLog = log.responses().expect("every backend keeps responses");
        responses
            .put_response(&kept("resp_1", "a", 1_000))
            .await
            .unwrap();
        responses
            .put_response(&kept("resp_2", "a", 5_000))
            .await
            .unwrap();
        let got = responses.get_response("a", "resp_1").await.unwrap();
        assert_eq!(got, Some(kept("resp_1", "a", 1_000)), "{what}");
        assert_eq!(
            responses.get_response("b", "resp_1").await.unwrap(),
            None,
            "{what}: another tenant's id is unknown"
        );
        // A second write of the same id replaces the first.
        let mut again = kept("resp_2", "a", 6_000);
        again.response = "{}".into();
        responses.put_response(&again).await.unwrap();
        assert_eq!(
            responses.get_response("a", "resp_2").await.unwrap(),
            Some(again),
            "{what}"
        );
        assert!(
            !responses.delete_response("b", "resp_2").await.unwrap(),
            "{what}"
        );
        assert!(
            responses.delete_response("a", "resp_2").await.unwrap(),
            "{what}"
        );
        assert!(
            !responses.delete_response("a", "resp_2").await.unwrap(),
            "{what}"
        );
        responses
            .put_response(&kept("resp_3", "b", 9_000))
            .await
            .unwrap();
        let pruned = log.prune(5_000).await.unwrap();
        assert_eq!(pruned.responses, 1, "{what}: resp_1 only");
        assert_eq!(
            responses.get_response("a", "resp_1").await.unwrap(),
            None,
            "{what}"
        );
        assert!(
            responses
                .get_response("b", "resp_3")
                .await
                .unwrap()
                .is_some(),
            "{what}"
        );
    }
}

//! `/.well-known/openwop`: what this host is and can do, readable without
//! a token.

use crate::packs::PackStore;
use callai_engine::{Host, facet};
use serde_json::{Value, json};

/// RFC 0248's fixture (`tests/fixtures/conformance-callai-attempt-accounting/pack.json`):
/// its id, version and one node.
const FIXTURE: (&str, &str, &str) = (
    "conformance-callai-attempt-accounting",
    "0.1.0",
    "conformance.callai.echo-attempts",
);

/// The fixtures this host runs: RFC 0248's, when a shared pack is its node.
fn fixtures(packs: &PackStore) -> Vec<Value> {
    let (id, version, node) = FIXTURE;
    packs
        .list(None)
        .into_iter()
        .filter(|p| p.tenant.is_none() && p.node_id == node)
        .take(1)
        .map(|p| json!({"id": id, "version": version, "nodes": [node], "pack": p.name}))
        .collect()
}

/// The discovery document: the `aiProviders` facet and the reliability
/// capability under `capabilities`, the conformance fixtures it runs, and
/// the API's endpoints.
pub fn document(host: &Host, packs: &PackStore) -> Value {
    json!({
        "host": {"name": "callai", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {
            "aiProviders": facet::ai_providers(host),
            "envelopes": {"reliability": facet::reliability(host)},
        },
        "fixtures": fixtures(packs),
        "endpoints": {
            "facet": "/v1/facet",
            "packs": "/v1/packs",
            "runs": "/v1/runs",
            "call": "/v1/call",
            "metrics": "/metrics",
            "health": "/healthz",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::HostConfig;

    #[test]
    fn the_document_carries_the_facet_and_the_reliability_capability() {
        let host = Host::builder(HostConfig::default()).build().unwrap();
        let runtime = callai_host::PackRuntime::new().unwrap();
        let packs = PackStore::new(runtime, Vec::new(), 1);
        let doc = document(&host, &packs);
        assert_eq!(doc["fixtures"], json!([]), "no pack is the fixture's node");
        assert_eq!(
            doc["capabilities"]["aiProviders"]["callAccounting"],
            json!({"attempts": true, "retryPolicy": true})
        );
        let r = &doc["capabilities"]["envelopes"]["reliability"];
        assert_eq!(r["supported"], true);
        assert_eq!(r["maxRetryAttempts"], 3);
        assert_eq!(r["completion"]["distinguishesTruncation"], true);
        assert_eq!(r["completion"]["truncationBudgetMultiplier"], 2);
    }
}

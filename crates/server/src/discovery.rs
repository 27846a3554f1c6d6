//! `/.well-known/openwop`: what this host is and can do, readable without
//! a token.

use callai_engine::{Host, facet};
use serde_json::{Value, json};

/// The discovery document: the `aiProviders` facet and the reliability
/// capability under `capabilities`, and the API's endpoints.
pub fn document(host: &Host) -> Value {
    json!({
        "host": {"name": "callai", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {
            "aiProviders": facet::ai_providers(host),
            "envelopes": {"reliability": facet::reliability(host)},
        },
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
        let doc = document(&host);
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

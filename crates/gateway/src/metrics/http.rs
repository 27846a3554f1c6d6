//! How long `serve` took to answer, per endpoint (its route, such as
//! `/v1/chat/completions` or `/v1/runs/{id}`: a bounded label) and status:
//! `callai_http_request_duration_seconds`, a histogram an SRE reads a p99
//! from, drop-ins included. A streamed answer counts until its headers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    endpoint: String,
    method: String,
    status: u16,
}

/// 1 ms to 5 minutes: a cached answer to a long generation.
fn latency() -> Histogram {
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0, 300.0,
    ])
}

/// Requests' durations by endpoint.
#[derive(Debug)]
pub(super) struct Http {
    durations: Family<HttpLabels, Histogram, fn() -> Histogram>,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            durations: Family::new_with_constructor(latency),
        }
    }
}

impl Http {
    /// Registers its family.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "callai_http_request_duration_seconds",
            "How long serve took to answer each request, by endpoint (its route), method and \
             status; a stream until its headers",
            self.durations.clone(),
        );
    }

    /// A `method` request to route `endpoint` was answered `status` after
    /// `seconds`.
    pub(super) fn answered(&self, endpoint: &str, method: &str, status: u16, seconds: f64) {
        self.durations
            .get_or_create(&HttpLabels {
                endpoint: endpoint.to_owned(),
                method: method.to_owned(),
                status,
            })
            .observe(seconds);
    }
}

//! What the providers did, beside the requests counted by why they were
//! sent: their failures by HTTP status (or `transport` when none came),
//! the input tokens they reported, and each target's circuit breaker
//! (`closed`, `open`, `half_open`: one series per state, 1 for the one it
//! is in), read from the host as `/metrics` is read.

use callai_engine::breaker::TargetHealth;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    provider: String,
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InputLabel {
    provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BreakerLabels {
    provider: String,
    model: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    provider: String,
    protocol: &'static str,
}

/// The states a breaker's series name.
const STATES: [&str; 3] = ["closed", "open", "half_open"];

/// The providers' families.
#[derive(Debug, Default)]
pub(super) struct Upstream {
    errors: Family<ErrorLabels, Counter>,
    input_tokens: Family<InputLabel, Counter>,
    breakers: Family<BreakerLabels, Gauge>,
    held_back: Family<InputLabel, Counter>,
    connections: Family<ConnectionLabels, Gauge>,
    streams: Family<InputLabel, Gauge>,
}

impl Upstream {
    /// Registers its families.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "callai_provider_errors",
            "Provider requests that failed, by provider and HTTP status (transport: no status \
             came, a refused connection, a timeout, a reset or a reply cut off)",
            self.errors.clone(),
        );
        registry.register(
            "callai_input_tokens",
            "Input tokens the providers reported (cached ones included), over every request",
            self.input_tokens.clone(),
        );
        registry.register(
            "callai_circuit_breaker_state",
            "Each target's circuit breaker: 1 for the state it is in (closed, open: tried after \
             its chain's other targets, half_open: the next call tries it first), 0 for the others",
            self.breakers.clone(),
        );
        registry.register(
            "callai_provider_quota_refused",
            "Requests this host held back because their provider's quota \
             ([providers.NAME.limits]) had no room: each went to its chain's next target, or \
             ended its call",
            self.held_back.clone(),
        );
        registry.register(
            "callai_upstream_connections",
            "Connections open to each provider's server, by protocol (http1, http2): HTTP/2 \
             ones are added as the streams in flight fill them, up to maxConnections",
            self.connections.clone(),
        );
        registry.register(
            "callai_upstream_streams_in_flight",
            "Requests in flight on each provider's HTTP/2 connections, a stream each",
            self.streams.clone(),
        );
    }

    /// The connections open to `provider` now.
    pub(super) fn set_connections(&self, provider: &str, now: callai_engine::Connections) {
        for (protocol, n) in [("http1", now.http1), ("http2", now.http2)] {
            self.connections
                .get_or_create(&ConnectionLabels {
                    provider: provider.to_owned(),
                    protocol,
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.streams
            .get_or_create(&InputLabel {
                provider: provider.to_owned(),
            })
            .set(i64::try_from(now.streams).unwrap_or(i64::MAX));
    }

    /// The counter of `provider`'s requests its quota held back.
    pub(super) fn held_back(&self, provider: &str) -> Counter {
        self.held_back.get_or_create_owned(&InputLabel {
            provider: provider.to_owned(),
        })
    }

    /// Each provider's input tokens, at zero.
    pub(super) fn seed(&self, providers: &[&str]) {
        for provider in providers {
            let _ = self.input_tokens.get_or_create(&InputLabel {
                provider: (*provider).to_owned(),
            });
        }
    }

    /// A request to `provider` failed, with HTTP `status` if one came.
    pub(super) fn failed(&self, provider: &str, status: Option<u16>) {
        let status = status.map_or_else(|| "transport".to_owned(), |s| s.to_string());
        self.errors
            .get_or_create(&ErrorLabels {
                provider: provider.to_owned(),
                status,
            })
            .inc();
    }

    /// `provider` reported `n` input tokens.
    pub(super) fn input(&self, provider: &str, n: u32) {
        self.input_tokens
            .get_or_create(&InputLabel {
                provider: provider.to_owned(),
            })
            .inc_by(n.into());
    }

    /// Each target's breaker as `health` says.
    pub(super) fn set_health(&self, health: &[TargetHealth]) {
        for target in health {
            let now = target.state.as_str();
            for state in STATES {
                self.breakers
                    .get_or_create(&BreakerLabels {
                        provider: target.provider.clone(),
                        model: target.model.clone(),
                        state,
                    })
                    .set(i64::from(state == now));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::breaker::BreakerState;

    #[test]
    fn a_breakers_state_is_one_series_at_one_and_the_others_at_zero() {
        let upstream = Upstream::default();
        let mut registry = Registry::default();
        upstream.register(&mut registry);
        upstream.failed("p", Some(503));
        upstream.failed("p", None);
        upstream.input("p", 12);
        upstream.held_back("p").inc();
        let now = callai_engine::Connections {
            http1: 0,
            http2: 3,
            streams: 25,
        };
        upstream.set_connections("p", now);
        upstream.set_health(&[TargetHealth {
            provider: "p".into(),
            model: "m".into(),
            state: BreakerState::Open {
                retry_in: std::time::Duration::from_secs(3),
            },
            consecutive_failures: 5,
            requests: 5,
            unavailable: 5,
            last_error: None,
        }]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "callai_provider_errors_total{provider=\"p\",status=\"503\"} 1",
            "callai_provider_errors_total{provider=\"p\",status=\"transport\"} 1",
            "callai_input_tokens_total{provider=\"p\"} 12",
            "callai_provider_quota_refused_total{provider=\"p\"} 1",
            "callai_upstream_connections{provider=\"p\",protocol=\"http2\"} 3",
            "callai_upstream_connections{provider=\"p\",protocol=\"http1\"} 0",
            "callai_upstream_streams_in_flight{provider=\"p\"} 25",
            "callai_circuit_breaker_state{provider=\"p\",model=\"m\",state=\"open\"} 1",
            "callai_circuit_breaker_state{provider=\"p\",model=\"m\",state=\"closed\"} 0",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}

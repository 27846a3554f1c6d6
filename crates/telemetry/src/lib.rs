//! OpenTelemetry traces of callAI runs, in the GenAI semantic conventions,
//! exported over OTLP/HTTP.
//!
//! - a span per node run (`run {nodeId}`);
//! - under it, a `chat {model}` span per ctx.callAI, with
//!   `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
//!   `gen_ai.request.max_tokens`, `gen_ai.response.finish_reasons`, and
//!   `gen_ai.usage.input_tokens` / `output_tokens` summed over every
//!   provider request of the call, plus `callai.attempts.count` and
//!   `callai.attempts.usage_complete` (RFC 0248);
//! - under that, one span per provider request (`attempt {n}`): its index,
//!   why it was sent, the `max_tokens` it carried, the HTTP status, and that
//!   request's own usage.
//!
//! Sum usage over one level only: the call span already holds its
//! requests' total.
//!
//! ```no_run
//! use callai_telemetry::{Telemetry, TelemetryConfig};
//!
//! let config = TelemetryConfig {
//!     otlp_endpoint: Some("http://127.0.0.1:4318".into()),
//!     ..TelemetryConfig::default()
//! };
//! let telemetry = Telemetry::from_config(&config, |k| std::env::var(k).ok())?
//!     .expect("an endpoint is set");
//! let run = telemetry.run("demo.node", Some("run-1"), "echo-attempts");
//! // Hand `run.observer()` to the run (`RunOptions::observer`), then:
//! run.end(Ok(()));
//! telemetry.shutdown();
//! # Ok::<(), callai_telemetry::TelemetryError>(())
//! ```

#![warn(missing_docs)]

mod config;
mod cost;
mod origin;
mod spans;

pub use config::TelemetryConfig;
pub use origin::Origin;
pub use spans::{RunTrace, SpanObserver};

use config::check_http_url;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::Arc;
use std::time::Duration;

/// The standard variable naming the collector's base URL.
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard variable naming the traces URL itself (wins over [`ENDPOINT_VAR`]).
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// Traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an http(s) URL.
    #[error("{source_name}: {message}")]
    Endpoint {
        /// Where the endpoint came from (the config key or the variable).
        source_name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The exporter could not be built.
    #[error("cannot start the OTLP exporter: {0}")]
    Exporter(String),
}

/// An OTLP/HTTP trace pipeline: spans are batched and sent from a thread of
/// their own, never on the threads that run packs.
#[derive(Debug, Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: Arc<SdkTracer>,
    endpoint: String,
}

impl Telemetry {
    /// The pipeline `config` asks for: `[telemetry] otlpEndpoint`, else
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (read through `env`). `None` when none
    /// is set: no traces.
    pub fn from_config(
        config: &TelemetryConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let (source_name, url) = if let Some(base) = &config.otlp_endpoint {
            ("telemetry.otlpEndpoint", traces_url(base))
        } else if let Some(url) = nonempty(TRACES_ENDPOINT_VAR) {
            (TRACES_ENDPOINT_VAR, url)
        } else if let Some(base) = nonempty(ENDPOINT_VAR) {
            (ENDPOINT_VAR, traces_url(&base))
        } else {
            return Ok(None);
        };
        check_http_url(&url)
            .map(drop)
            .map_err(|message| TelemetryError::Endpoint {
                source_name,
                message,
            })?;
        Self::new(&url, &config.service_name).map(Some)
    }

    /// A pipeline sending to the traces URL `url` (e.g.
    /// `http://127.0.0.1:4318/v1/traces`) as service `service_name`.
    pub fn new(url: &str, service_name: &str) -> Result<Self, TelemetryError> {
        // The blocking client speaks TLS through rustls; its crypto provider
        // is the one the providers' client installs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(service_name.to_owned())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = Arc::new(provider.tracer("callai"));
        Ok(Self {
            provider,
            tracer,
            endpoint: url.to_owned(),
        })
    }

    /// Where the spans go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Starts the span of one node run; its calls go under it.
    pub fn run(&self, node_id: &str, run_id: Option<&str>, pack: &str) -> RunTrace {
        RunTrace::start(
            self.tracer.clone(),
            node_id,
            run_id,
            pack,
            &Origin::default(),
        )
    }

    /// [`Telemetry::run`] for `origin`: its tenant on the run's span, and
    /// the span a child of the caller's when it sent a `traceparent`.
    pub fn run_for(&self, node_id: &str, run_id: &str, pack: &str, origin: &Origin) -> RunTrace {
        RunTrace::start(self.tracer.clone(), node_id, Some(run_id), pack, origin)
    }

    /// An observer whose call spans have no run above them (`/v1/call`).
    pub fn calls(&self) -> SpanObserver {
        SpanObserver::root(self.tracer.clone(), &Origin::default())
    }

    /// [`Telemetry::calls`] for `origin`: its tenant and call id on the
    /// call's span, a child of the caller's when it sent a `traceparent`.
    pub fn calls_for(&self, origin: &Origin) -> SpanObserver {
        SpanObserver::root(self.tracer.clone(), origin)
    }

    /// Sends every span ended so far.
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }

    /// Sends what is left and stops the pipeline.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

/// `{base}/v1/traces`, as the OTLP/HTTP spec builds it from a base URL.
fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_comes_from_the_config_then_the_variables() {
        let none = |_: &str| None;
        assert!(
            Telemetry::from_config(&TelemetryConfig::default(), none)
                .unwrap()
                .is_none()
        );
        let base = |k: &str| (k == ENDPOINT_VAR).then(|| "http://127.0.0.1:1/".to_owned());
        let t = Telemetry::from_config(&TelemetryConfig::default(), base)
            .unwrap()
            .unwrap();
        assert_eq!(t.endpoint(), "http://127.0.0.1:1/v1/traces");
        t.shutdown();
        let both = |k: &str| match k {
            ENDPOINT_VAR => Some("http://127.0.0.1:1".to_owned()),
            TRACES_ENDPOINT_VAR => Some("http://127.0.0.1:2/traces".to_owned()),
            _ => None,
        };
        let t = Telemetry::from_config(&TelemetryConfig::default(), both)
            .unwrap()
            .unwrap();
        assert_eq!(t.endpoint(), "http://127.0.0.1:2/traces");
        t.shutdown();
        let config = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:3".into()),
            ..TelemetryConfig::default()
        };
        let t = Telemetry::from_config(&config, both).unwrap().unwrap();
        assert_eq!(t.endpoint(), "http://127.0.0.1:3/v1/traces");
        t.shutdown();
    }

    #[test]
    fn a_bad_variable_is_named() {
        let bad = |k: &str| (k == ENDPOINT_VAR).then(|| "127.0.0.1:4318".to_owned());
        let e = Telemetry::from_config(&TelemetryConfig::default(), bad).unwrap_err();
        assert!(e.to_string().contains(ENDPOINT_VAR), "{e}");
    }
}

//! An OTLP/HTTP trace receiver on loopback: it takes what an exporter
//! posts to `/v1/traces` (protobuf), decodes it, and hands the spans over
//! in a shape tests can read.

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One span as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Its name.
    pub name: String,
    /// Hex.
    pub trace_id: String,
    /// Hex.
    pub span_id: String,
    /// Hex; empty for a root span.
    pub parent_span_id: String,
    /// Its attributes, as JSON values (arrays for array attributes).
    pub attributes: BTreeMap<String, Value>,
    /// 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// The status message.
    pub status_message: String,
    /// The `service.name` of its resource.
    pub service: String,
}

impl Span {
    /// The attribute `key`, or null.
    pub fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }
}

/// The running receiver.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT`: the base URL an exporter is given.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

fn value(v: &AnyValue) -> Value {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => Value::Array(a.values.iter().map(value).collect()),
        _ => Value::Null,
    }
}

impl Receiver {
    /// Listens on a free loopback port.
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let sink = spans.clone();
        let app = Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| {
                let sink = sink.clone();
                async move {
                    let request = ExportTraceServiceRequest::decode(body)
                        .expect("the exporter sends OTLP protobuf");
                    let mut out = sink.lock().unwrap();
                    for rs in request.resource_spans {
                        let service = rs
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|kv| kv.key == "service.name")
                            .and_then(|kv| kv.value.as_ref())
                            .map(value)
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                            let status = span.status.unwrap_or_default();
                            out.push(Span {
                                name: span.name,
                                trace_id: hex::encode(&span.trace_id),
                                span_id: hex::encode(&span.span_id),
                                parent_span_id: hex::encode(&span.parent_span_id),
                                attributes: span
                                    .attributes
                                    .iter()
                                    .map(|kv| {
                                        let v = kv.value.as_ref().map_or(Value::Null, value);
                                        (kv.key.clone(), v)
                                    })
                                    .collect(),
                                status_code: status.code,
                                status_message: status.message,
                                service: service.clone(),
                            });
                        }
                    }
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { endpoint, spans }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (up to 10 s) until `n` spans have arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Span> {
        for _ in 0..1000 {
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{n} spans never arrived: {:#?}", self.spans());
    }
}

//! One line on stderr per request (`[log] format`): when, what, its status
//! and duration, and for a call its id, tenant, attempts, output tokens
//! and cost, read from the answer's own `x-callai-*` headers; for an error,
//! its code and the field or provider it names, read from the error the
//! answer was made of. Nothing else of the request is written: no header
//! (so no key or token), no query, no body, no error message (it may quote
//! what a provider said). The same layer times every request into
//! `callai_http_request_duration_seconds`, by route: one clock for both.

use crate::error::ApiError;
use crate::headers::{ATTEMPTS_COUNT, ATTEMPTS_OUTPUT_TOKENS, CALL_ID, COST, COST_CURRENCY};
use crate::layers::around::{Around, Before};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, Method};
use axum::response::Response;
use callai_gateway::config::LogFormat;
use callai_gateway::ids::{push_rfc3339, rfc3339};
use callai_gateway::metrics::Metrics;
use std::sync::Arc;
use std::time::Instant;
use writer::LineWriter;

mod writer;

/// The line each request writes: its format, and the writer that takes
/// the lines (none when the format is `off`); and the metrics each
/// request's duration is observed in.
#[derive(Debug, Clone)]
pub struct AccessLog {
    format: LogFormat,
    writer: Option<LineWriter>,
    metrics: Option<Arc<Metrics>>,
}

impl AccessLog {
    /// The log `format` asks for, its writer's thread started.
    pub fn start(format: LogFormat) -> std::io::Result<Self> {
        let writer = match format {
            LogFormat::Off => None,
            LogFormat::Text | LogFormat::Json => Some(LineWriter::spawn()?),
        };
        Ok(Self {
            format,
            writer,
            metrics: None,
        })
    }

    /// The same log, each request's duration observed in `metrics` too.
    pub fn timing(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Writes every line so far and ends the writer's thread.
    pub fn close(&self) {
        if let Some(w) = &self.writer {
            w.close();
        }
    }
}

/// The caller a response answered, as the auth layer found it.
#[derive(Debug, Clone)]
pub struct Answered(pub Arc<callai_gateway::tenants::Tenant>);

/// Each request's line, written once its response is ready.
impl Around for AccessLog {
    /// What the line says of the request, and the writer it goes to (none
    /// when the log is off).
    type Carry = Option<Pending>;

    fn before(&self, request: &mut Request) -> Before<Option<Pending>> {
        if self.writer.is_none() && self.metrics.is_none() {
            return Before::Go(None);
        }
        let endpoint = request
            .extensions()
            .get::<MatchedPath>()
            .map_or(OTHER, |m| endpoint(m.as_str()));
        Before::Go(Some(Pending {
            started: Instant::now(),
            method: request.method().clone(),
            endpoint,
            line: self.writer.as_ref().map(|writer| PendingLine {
                path: request.uri().path().to_owned(),
                writer: writer.clone(),
                format: self.format,
            }),
            metrics: self.metrics.clone(),
        }))
    }

    fn after(pending: Option<Pending>, response: Response) -> Response {
        let Some(pending) = pending else {
            return response;
        };
        let elapsed = pending.started.elapsed().as_secs_f64();
        let status = response.status().as_u16();
        if let Some(metrics) = &pending.metrics {
            metrics.answered(pending.endpoint, method(&pending.method), status, elapsed);
        }
        let Some(log) = pending.line else {
            return response;
        };
        let line = Line {
            time_ms: callai_engine::events::now_ms(),
            method: pending.method.as_str(),
            path: &log.path,
            status,
            duration_ms: elapsed * 1000.0,
            tenant: response
                .extensions()
                .get::<Answered>()
                .map(|a| a.0.name.as_str()),
            headers: &response,
        };
        log.writer.append(&line.render(log.format));
        response
    }
}

/// The label of a route the metrics do not name.
const OTHER: &str = "other";

/// The routes `callai_http_request_duration_seconds` names, as axum
/// matched them: a bounded label that costs no allocation per request.
/// Keep in step with `routes.rs` (a route missing here is `other`).
const ENDPOINTS: [&str; 20] = [
    "/v1/call",
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/models",
    "/v1/runs",
    "/v1/runs/{run_id}",
    "/v1/runs/{run_id}/events",
    "/v1/calls",
    "/v1/calls/{id}",
    "/v1/usage",
    "/v1/budget",
    "/v1/tenants",
    "/v1/targets",
    "/v1/facet",
    "/v1/packs",
    "/v1/packs/{name}",
    "/metrics",
    "/healthz",
    "/.well-known/openwop",
    "/ui",
];

/// `matched`'s name in [`ENDPOINTS`] (the viewer's page and each of its
/// assets: `/ui`), or [`OTHER`].
fn endpoint(matched: &str) -> &'static str {
    if matched.starts_with("/ui") {
        return "/ui";
    }
    ENDPOINTS
        .iter()
        .find(|e| **e == matched)
        .copied()
        .unwrap_or(OTHER)
}

/// `method` as a label: the methods the API takes, else `OTHER`.
fn method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// A request's observations to be, taken before it is handed on: its
/// start, what its line says of it and where the line goes (none when the
/// log is off), and the metrics its duration goes to.
#[derive(Debug)]
pub struct Pending {
    started: Instant,
    method: Method,
    endpoint: &'static str,
    line: Option<PendingLine>,
    metrics: Option<Arc<Metrics>>,
}

/// What a request's line says of it, and where and how it is written.
#[derive(Debug)]
pub struct PendingLine {
    path: String,
    writer: LineWriter,
    format: LogFormat,
}

/// What one line says.
struct Line<'a> {
    /// When, in ms since the Unix epoch.
    time_ms: u64,
    method: &'a str,
    path: &'a str,
    status: u16,
    duration_ms: f64,
    tenant: Option<&'a str>,
    headers: &'a Response,
}

/// Room for a typical text line: its time, method, path and status, a
/// tenant, a call id, attempts, tokens and a cost.
const TEXT_LINE_BYTES: usize = 192;

/// A line as JSON: its keys in the order the text line says them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLine<'a> {
    time: &'a str,
    method: &'a str,
    path: &'a str,
    status: u16,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    #[serde(flatten)]
    reported: Reported<'a>,
}

/// The answer's `x-callai-*` headers a line reports, as their text.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Reported<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    currency: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<&'a str>,
}

impl<'a> Reported<'a> {
    /// What `response` carries of them.
    fn of(response: &'a Response) -> Self {
        let header = |name: &HeaderName| response.headers().get(name)?.to_str().ok();
        let error = response.extensions().get::<ApiError>();
        let detail = |key: &str| error?.details.as_ref()?.get(key)?.as_str();
        Self {
            call_id: header(&CALL_ID),
            attempts: header(&ATTEMPTS_COUNT),
            output_tokens: header(&ATTEMPTS_OUTPUT_TOKENS),
            cost: header(&COST),
            currency: header(&COST_CURRENCY),
            error: error.map(|e| e.code.as_str()),
            field: detail("field"),
            provider: detail("provider"),
        }
    }

    /// Each it carries, by its name in the line, in the line's order.
    fn named(&self) -> impl Iterator<Item = (&'static str, &'a str)> {
        [
            ("callId", self.call_id),
            ("attempts", self.attempts),
            ("outputTokens", self.output_tokens),
            ("cost", self.cost),
            ("currency", self.currency),
            ("error", self.error),
            ("field", self.field),
            ("provider", self.provider),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
    }
}

impl Line<'_> {
    fn render(&self, format: LogFormat) -> String {
        let reported = Reported::of(self.headers);
        match format {
            LogFormat::Json => {
                let time = rfc3339(self.time_ms);
                let line = JsonLine {
                    time: &time,
                    method: self.method,
                    path: self.path,
                    status: self.status,
                    duration_ms: self.duration_ms.round(),
                    tenant: self.tenant,
                    reported,
                };
                serde_json::to_string(&line).expect("a log line serializes")
            }
            LogFormat::Text | LogFormat::Off => {
                // One allocation for the line, however many fields it has,
                // each pushed as it is: no format to interpret (a line a
                // request), the numbers by `itoa`.
                let mut out = String::with_capacity(TEXT_LINE_BYTES);
                push_rfc3339(&mut out, self.time_ms);
                for piece in [" ", self.method, " ", self.path, " "] {
                    out.push_str(piece);
                }
                out.push_str(itoa::Buffer::new().format(self.status));
                out.push(' ');
                // Rounded as the JSON line's: half a millisecond up.
                let ms = self.duration_ms.round() as u64;
                out.push_str(itoa::Buffer::new().format(ms));
                out.push_str("ms");
                let tenant = self.tenant.map(|t| ("tenant", t));
                for (name, value) in tenant.into_iter().chain(reported.named()) {
                    for piece in [" ", name, "=", value] {
                        out.push_str(piece);
                    }
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(response: &Response) -> Line<'_> {
        Line {
            time_ms: 1_796_292_000_000,
            method: "POST",
            path: "/v1/call",
            status: 200,
            duration_ms: 411.6,
            tenant: Some("acme"),
            headers: response,
        }
    }

    #[test]
    fn a_line_says_its_figures_in_order_in_text_and_json() {
        let mut response = Response::new(axum::body::Body::empty());
        for (name, value) in [
            ("x-callai-cost-currency", "USD"),
            ("x-callai-call-id", "call_0123456789abcdef"),
            ("x-callai-attempts-count", "2"),
            ("x-callai-cost", "0.003"),
            ("authorization", "Bearer tok-secret"),
        ] {
            response
                .headers_mut()
                .insert(name, axum::http::HeaderValue::from_static(value));
        }
        let line = line(&response);
        assert_eq!(
            line.render(LogFormat::Text),
            "2026-12-03T10:00:00.000Z POST /v1/call 200 412ms tenant=acme \
             callId=call_0123456789abcdef attempts=2 cost=0.003 currency=USD"
        );
        assert_eq!(
            line.render(LogFormat::Json),
            r#"{"time":"2026-12-03T10:00:00.000Z","method":"POST","path":"/v1/call","status":200,"durationMs":412.0,"tenant":"acme","callId":"call_0123456789abcdef","attempts":"2","cost":"0.003","currency":"USD"}"#
        );
    }

    #[test]
    fn a_failed_calls_line_says_its_code_and_what_it_names_never_its_message() {
        let error = ApiError::from_call(&callai_engine::wire::CallError::validation(
            "messages[0]",
            "sk-secret is odd",
        ));
        let response = axum::response::IntoResponse::into_response(error);
        let line = line(&response);
        let text = line.render(LogFormat::Text);
        assert!(
            text.ends_with("tenant=acme error=validation_error field=messages[0]"),
            "{text}"
        );
        assert!(!text.contains("sk-secret"));
        let json = line.render(LogFormat::Json);
        assert!(
            json.ends_with(r#""error":"validation_error","field":"messages[0]"}"#),
            "{json}"
        );
    }

    #[test]
    fn a_line_without_figures_says_only_the_request() {
        let response = Response::new(axum::body::Body::empty());
        let mut line = line(&response);
        line.tenant = None;
        assert_eq!(
            line.render(LogFormat::Text),
            "2026-12-03T10:00:00.000Z POST /v1/call 200 412ms"
        );
        assert_eq!(
            line.render(LogFormat::Json),
            r#"{"time":"2026-12-03T10:00:00.000Z","method":"POST","path":"/v1/call","status":200,"durationMs":412.0}"#
        );
    }

    #[test]
    fn a_lines_duration_is_rounded_alike_in_text_and_json() {
        let response = Response::new(axum::body::Body::empty());
        let mut line = line(&response);
        line.tenant = None;
        for (ms, whole) in [(0.0, 0), (0.49, 0), (0.5, 1), (2.5, 3), (1_234.51, 1_235)] {
            line.duration_ms = ms;
            let text = line.render(LogFormat::Text);
            assert!(text.ends_with(&format!(" 200 {whole}ms")), "{ms}: {text}");
            let json: serde_json::Value =
                serde_json::from_str(&line.render(LogFormat::Json)).unwrap();
            assert_eq!(json["durationMs"], f64::from(whole), "{ms}");
        }
    }
}

//! One line on stderr per request (`[log] format`): when, what, its status
//! and duration, and for a call its id, tenant, attempts, output tokens
//! and cost, read from the answer's own `x-callai-*` headers. Nothing else
//! of the request is written: no header (so no key or token), no query, no
//! body.

use crate::runs::rfc3339;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use callai_config::LogFormat;
use std::fmt::Write;
use std::time::Instant;
use writer::LineWriter;

mod writer;

/// The line each request writes: its format, and the writer that takes
/// the lines (none when the format is `off`).
#[derive(Debug, Clone)]
pub struct AccessLog {
    format: LogFormat,
    writer: Option<LineWriter>,
}

impl AccessLog {
    /// The log `format` asks for, its writer's thread started.
    pub fn start(format: LogFormat) -> std::io::Result<Self> {
        let writer = match format {
            LogFormat::Off => None,
            LogFormat::Text | LogFormat::Json => Some(LineWriter::spawn()?),
        };
        Ok(Self { format, writer })
    }

    /// Whether no line is written.
    pub fn is_off(&self) -> bool {
        self.writer.is_none()
    }

    /// Writes every line so far and ends the writer's thread.
    pub fn close(&self) {
        if let Some(w) = &self.writer {
            w.close();
        }
    }
}

/// The name of the caller a response answered, as the auth layer found it.
#[derive(Debug, Clone)]
pub struct Answered(pub String);

/// The middleware: runs the request, then writes its line.
pub async fn log_request(State(log): State<AccessLog>, request: Request, next: Next) -> Response {
    let Some(writer) = &log.writer else {
        return next.run(request).await;
    };
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let line = Line {
        time: rfc3339(callai_engine::events::now_ms()),
        method: method.as_str(),
        path: &path,
        status: response.status().as_u16(),
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        tenant: response
            .extensions()
            .get::<Answered>()
            .map(|a| a.0.as_str()),
        headers: &response,
    };
    writer.append(&line.render(log.format));
    response
}

/// What one line says.
struct Line<'a> {
    time: String,
    method: &'a str,
    path: &'a str,
    status: u16,
    duration_ms: f64,
    tenant: Option<&'a str>,
    headers: &'a Response,
}

/// The answer headers a line reports, and their names in it.
const REPORTED: [(&str, &str); 5] = [
    ("x-callai-call-id", "callId"),
    ("x-callai-attempts-count", "attempts"),
    ("x-callai-attempts-output-tokens", "outputTokens"),
    ("x-callai-cost", "cost"),
    ("x-callai-cost-currency", "currency"),
];

impl Line<'_> {
    /// Each reported header the answer carries, by its name in the line.
    fn reported(&self) -> impl Iterator<Item = (&'static str, &str)> {
        REPORTED.into_iter().filter_map(|(header, name)| {
            let value = self.headers.headers().get(header)?.to_str().ok()?;
            Some((name, value))
        })
    }

    fn render(&self, format: LogFormat) -> String {
        match format {
            LogFormat::Json => {
                let mut fields = serde_json::Map::new();
                fields.insert("time".into(), self.time.clone().into());
                fields.insert("method".into(), self.method.into());
                fields.insert("path".into(), self.path.into());
                fields.insert("status".into(), self.status.into());
                fields.insert("durationMs".into(), self.duration_ms.round().into());
                if let Some(t) = self.tenant {
                    fields.insert("tenant".into(), t.into());
                }
                for (name, value) in self.reported() {
                    fields.insert(name.into(), value.into());
                }
                serde_json::Value::Object(fields).to_string()
            }
            LogFormat::Text | LogFormat::Off => {
                let mut out = format!(
                    "{} {} {} {} {:.0}ms",
                    self.time, self.method, self.path, self.status, self.duration_ms
                );
                if let Some(t) = self.tenant {
                    let _ = write!(out, " tenant={t}");
                }
                for (name, value) in self.reported() {
                    let _ = write!(out, " {name}={value}");
                }
                out
            }
        }
    }
}

//! How requests reach a provider: hyper's client connections under a pool
//! of this crate's own ([`pool`]), because reqwest's keeps one HTTP/2
//! connection per host and so caps a whole host at the server's stream
//! limit. Every guarantee reqwest gave stays: rustls with the system's
//! roots, a deadline over the whole request and its body, no redirect
//! followed (a response is handed back as it came), bodies read by the
//! caller up to its cap. A response is handed out as this module's
//! [`Response`]: its status and headers, its body a chunk at a time.
//!
//! A request the server refused unseen (on a connection it sent `GOAWAY`
//! on, past its last stream, or with `REFUSED_STREAM`, which RFC 9113
//! says no server processed) is sent again on another connection; one
//! that failed in flight is the caller's transient failure.

mod body;
mod conn;
mod connect;
mod pool;
pub(crate) mod settings;
mod tls;

pub(crate) use body::{BodyFailed, Response};
use body::{Slot, Tracked};
use bytes::Bytes;
use callai_engine::Connections;
use callai_engine::config::ConfigError;
use http::{HeaderMap, Request, Uri};
use http_body_util::Full;
use pool::{Lease, Pool};
use settings::TransportSettings;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often a request refused unseen is sent again, on another
/// connection each time.
const RESENDS: usize = 3;

/// Why a request got no response.
#[derive(Debug)]
pub(crate) enum SendFailed {
    /// No connection opened: nothing was sent.
    Unreached(String),
    /// The deadline passed first.
    TimedOut,
    /// It failed on its way or while the provider had it.
    Failed(String),
}

/// The way to one provider's server.
#[derive(Clone)]
pub(crate) struct Transport {
    pool: Arc<Pool>,
    origin: (String, String, Option<u16>),
    timeout: Duration,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("origin", &self.origin)
            .finish()
    }
}

impl Transport {
    /// The transport of provider `name`, whose requests go to
    /// `base_url`'s server and end within `timeout`.
    pub(crate) fn new(
        name: &str,
        s: &TransportSettings,
        base_url: &url::Url,
        env: &dyn Fn(&str) -> Option<String>,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        let invalid = |m: String| callai_engine::config::invalid(&format!("providers.{name}"), m);
        let target: Uri = base_url
            .as_str()
            .parse()
            .map_err(|e| invalid(format!("baseUrl: {e}")))?;
        let connect_timeout = timeout.min(Duration::from_secs(10));
        let connector = connect::Connector::new(name, s, env, connect_timeout)?;
        Ok(Self {
            pool: Pool::new(
                target,
                connector,
                s.max_connections,
                s.max_streams_per_connection,
                s.idle(),
            ),
            origin: origin(base_url),
            timeout,
        })
    }

    /// The connections open now.
    pub(crate) fn counts(&self) -> Connections {
        let (http1, http2, streams) = self.pool.counts();
        Connections {
            http1,
            http2,
            streams,
        }
    }

    /// POSTs `body` to `url` (on the provider's server) with `headers`;
    /// the response, whatever its status, with its body to be read before
    /// the deadline.
    pub(crate) async fn post(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, SendFailed> {
        if origin(url) != self.origin {
            return Err(SendFailed::Failed(format!(
                "{} is not on the provider's server",
                url.origin().ascii_serialization()
            )));
        }
        let deadline = Instant::now() + self.timeout;
        tokio::time::timeout_at(deadline, self.send(url, headers, body, deadline))
            .await
            .unwrap_or(Err(SendFailed::TimedOut))
    }

    async fn send(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
        body: Bytes,
        deadline: Instant,
    ) -> Result<Response, SendFailed> {
        for _ in 0..=RESENDS {
            let lease = self
                .pool
                .lease()
                .await
                .map_err(|e| SendFailed::Unreached(e.0))?;
            let h2 = matches!(lease, Lease::H2(_));
            let request = request(url, headers, body.clone(), h2)?;
            let sent = match lease {
                Lease::H2(conn) => {
                    let slot = Slot::H2(conn.clone());
                    let mut send = conn.send.clone();
                    match send.try_send_request(request).await {
                        Ok(response) => Ok((response, slot)),
                        Err(mut e) => {
                            let unsent = e.take_message().is_some() || refused_unseen(e.error());
                            // A failure of the connection, not of this
                            // stream alone: no new stream goes on it.
                            if unsent || !stream_reset(e.error()) {
                                conn.retire();
                            }
                            Err((unsent, e.into_error()))
                        }
                    }
                }
                Lease::H1(mut send) => {
                    let mut slot = Slot::H1 {
                        send: None,
                        pool: self.pool.clone(),
                        done: false,
                    };
                    match send.try_send_request(request).await {
                        Ok(response) => {
                            if let Slot::H1 { send: kept, .. } = &mut slot {
                                *kept = Some(send);
                            }
                            Ok((response, slot))
                        }
                        Err(mut e) => Err((e.take_message().is_some(), e.into_error())),
                    }
                }
            };
            match sent {
                Ok((response, slot)) => {
                    let (parts, incoming) = response.into_parts();
                    let body = Tracked::new(incoming, deadline, self.timeout, slot);
                    return Ok(Response::new(parts, body));
                }
                Err((true, _)) => continue,
                Err((false, e)) => return Err(SendFailed::Failed(chain(&e))),
            }
        }
        Err(SendFailed::Failed(format!(
            "the provider refused the request unseen on {} connections in turn",
            RESENDS + 1
        )))
    }
}

/// The request as the connection's HTTP version wants it: HTTP/2 with
/// the whole URL (its `:authority`), HTTP/1.1 with the path and `Host`.
fn request(
    url: &url::Url,
    headers: &HeaderMap,
    body: Bytes,
    h2: bool,
) -> Result<Request<Full<Bytes>>, SendFailed> {
    let bad =
        |e: http::Error| SendFailed::Failed(format!("the request is not one HTTP allows: {e}"));
    let mut builder = Request::post(if h2 {
        url.as_str().to_owned()
    } else {
        url[url::Position::BeforePath..url::Position::AfterQuery].to_owned()
    });
    if !h2 {
        let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
        builder = builder.header(http::header::HOST, host);
    }
    let mut request = builder.body(Full::new(body)).map_err(bad)?;
    request.headers_mut().extend(headers.clone());
    Ok(request)
}

/// Scheme, host and port (the scheme's own when absent).
fn origin(url: &url::Url) -> (String, String, Option<u16>) {
    (
        url.scheme().to_owned(),
        url.host_str().unwrap_or_default().to_owned(),
        url.port_or_known_default(),
    )
}

/// The HTTP/2 error under a hyper error, if there is one.
fn h2_error(error: &hyper::Error) -> Option<&h2::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return Some(h2);
        }
        source = e.source();
    }
    None
}

/// Whether the server refused a request without processing it: its stream
/// was past the last one a `GOAWAY` kept, or reset with `REFUSED_STREAM`.
fn refused_unseen(error: &hyper::Error) -> bool {
    h2_error(error).is_some_and(|h2| {
        (h2.is_go_away() && h2.is_remote()) || h2.reason() == Some(h2::Reason::REFUSED_STREAM)
    })
}

/// Whether the server reset this one stream (its connection lives on).
fn stream_reset(error: &hyper::Error) -> bool {
    h2_error(error).is_some_and(|h2| h2.is_reset() && h2.is_remote())
}

/// A failure and what caused it, on one line.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(tls) = tls::describe(error) {
        return tls;
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = e.source();
    }
    text
}

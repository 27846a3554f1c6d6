//! A provider's streamed answer: its server-sent events (parsed by the
//! `eventsource-stream` crate), read up to `limits.maxProviderBodyBytes`,
//! each event's data read into the wire format's typed event. The adapter
//! pulls them one at a time, so that a reader that falls behind holds the
//! provider's stream (and nothing piles up in between).

use super::http::HttpClient;
use callai_engine::{FailureKind, ProviderFailure};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use std::pin::Pin;

/// Why the byte stream under the events stopped.
#[derive(Debug)]
enum Cut {
    /// The transport failed.
    Transport(reqwest::Error),
    /// Past the body cap.
    Over(u64),
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "{e}"),
            Self::Over(cap) => write!(f, "over {cap} bytes"),
        }
    }
}

type RawEvents =
    Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, EventStreamError<Cut>>> + Send>>;

/// How a provider answered a request for a stream.
pub(crate) enum Streamed<A> {
    /// As events, to be read one at a time; the HTTP status.
    Events(u16, Events),
    /// With one JSON body (a server that does not stream): the status and
    /// the answer, read as a non-streamed answer is.
    Whole(u16, A),
}

/// One item of a stream: an event, or the stream's own end marker.
#[derive(Debug)]
pub(crate) enum Sse<E> {
    /// An event's data.
    Event(E),
    /// OpenAI's `[DONE]`.
    Done,
}

/// The events of a streamed answer.
pub(crate) struct Events {
    raw: RawEvents,
    status: u16,
}

impl Events {
    /// The next event, read as an `E`; `None` once the stream has ended.
    /// `http` says what a transport failure was.
    pub(crate) async fn next<E: DeserializeOwned>(
        &mut self,
        http: &HttpClient,
    ) -> Option<Result<Sse<E>, ProviderFailure>> {
        let status = self.status;
        let event = match self.raw.next().await? {
            Ok(event) => event,
            Err(EventStreamError::Transport(Cut::Transport(e))) => {
                return Some(Err(http.transport(&e)));
            }
            Err(EventStreamError::Transport(Cut::Over(cap))) => {
                return Some(Err(ProviderFailure::new(
                    FailureKind::TooLarge,
                    Some(status),
                    format!(
                        "limits.maxProviderBodyBytes: the provider's stream is over {cap} bytes; the rest was not read"
                    ),
                )));
            }
            Err(e) => {
                return Some(Err(ProviderFailure::new(
                    FailureKind::Transient,
                    Some(status),
                    format!("the provider's event stream is malformed: {e}"),
                )));
            }
        };
        if event.data == "[DONE]" {
            return Some(Ok(Sse::Done));
        }
        Some(
            serde_json::from_str(&event.data)
                .map(Sse::Event)
                .map_err(|e| {
                    let what = if e.is_data() {
                        "is not an event of its kind"
                    } else {
                        "is not JSON"
                    };
                    ProviderFailure::new(
                        FailureKind::Transient,
                        Some(status),
                        format!("an event of the provider's stream {what} ({e})"),
                    )
                }),
        )
    }
}

impl HttpClient {
    /// POSTs `body` and returns its answer's events to be read, or, from a
    /// server that answers with one JSON body instead, that answer read
    /// as [`HttpClient::post_json`] reads it.
    pub(crate) async fn post_events<A: DeserializeOwned>(
        &self,
        url: &reqwest::Url,
        headers: &reqwest::header::HeaderMap,
        body: Vec<u8>,
    ) -> Result<Streamed<A>, ProviderFailure> {
        let response = self.post(url, headers, body).await?;
        let status = response.status().as_u16();
        let is_events = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !is_events {
            let (status, answer) = self.read_json(response).await?;
            return Ok(Streamed::Whole(status, answer));
        }
        let cap = self.max_body();
        let bytes =
            futures_util::stream::unfold((response, 0u64), move |(mut r, read)| async move {
                match r.chunk().await {
                    Ok(Some(chunk)) if read.saturating_add(chunk.len() as u64) > cap => {
                        Some((Err(Cut::Over(cap)), (r, u64::MAX)))
                    }
                    Ok(Some(chunk)) => {
                        let read = read + chunk.len() as u64;
                        Some((Ok(chunk), (r, read)))
                    }
                    Ok(None) => None,
                    Err(e) => Some((Err(Cut::Transport(e)), (r, read))),
                }
            });
        let raw: RawEvents = Box::pin(bytes.eventsource());
        Ok(Streamed::Events(status, Events { raw, status }))
    }
}

//! A provider's streamed answer: its server-sent events (parsed by the
//! `eventsource-stream` crate), or Bedrock's AWS event stream (binary
//! frames, decoded by AWS's `aws-smithy-eventstream`), read up to
//! `limits.maxProviderBodyBytes`, each event's data read into the wire
//! format's typed event. The adapter pulls them one at a time, so that a
//! reader that falls behind holds the provider's stream (and nothing piles
//! up in between).

use super::http::HttpClient;
use super::transport::BodyFailed;
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message;
use bytes::BytesMut;
use callai_engine::{FailureKind, ProviderFailure};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use std::pin::Pin;

/// Why the byte stream under the events stopped.
#[derive(Debug)]
enum Cut {
    /// The transport failed.
    Transport(BodyFailed),
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

/// One event of either framing: its type (SSE's `event:`, the AWS
/// stream's `:event-type`), and its data.
struct Frame {
    kind: String,
    data: String,
}

/// Why a stream stopped short.
enum Broken {
    /// The bytes under it stopped.
    Cut(Cut),
    /// Its framing is not what it should be.
    Malformed(String),
    /// The AWS stream's own error (`:message-type: exception`): its type
    /// and message.
    Exception(String, String),
}

type RawEvents = Pin<Box<dyn Stream<Item = Result<Frame, Broken>> + Send>>;

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
    /// The next event, read by `parse` from its type and data; `None`
    /// once the stream has ended. `http` says what a transport failure
    /// was.
    pub(crate) async fn next<E>(
        &mut self,
        http: &HttpClient,
        parse: fn(&str, &str) -> serde_json::Result<E>,
    ) -> Option<Result<Sse<E>, ProviderFailure>> {
        let status = self.status;
        let failed = |kind, why: String| Some(Err(ProviderFailure::new(kind, Some(status), why)));
        let frame = match self.raw.next().await? {
            Ok(frame) => frame,
            Err(Broken::Cut(Cut::Transport(e))) => return Some(Err(http.transport(&e))),
            Err(Broken::Cut(Cut::Over(cap))) => {
                return failed(
                    FailureKind::TooLarge,
                    format!(
                        "limits.maxProviderBodyBytes: the provider's stream is over {cap} bytes; the rest was not read"
                    ),
                );
            }
            Err(Broken::Malformed(why)) => {
                return failed(
                    FailureKind::Transient,
                    format!("the provider's event stream is malformed: {why}"),
                );
            }
            Err(Broken::Exception(kind, message)) => {
                let message = http.redact(&message).into_owned();
                let kind = match kind.as_str() {
                    "validationException"
                    | "accessDeniedException"
                    | "resourceNotFoundException" => FailureKind::Rejected,
                    _ => FailureKind::Transient,
                };
                return failed(kind, format!("the provider's stream failed: {message}"));
            }
        };
        if frame.data == "[DONE]" {
            return Some(Ok(Sse::Done));
        }
        Some(
            parse(&frame.kind, &frame.data)
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
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let aws = content_type.starts_with("application/vnd.amazon.eventstream");
        if !aws && !content_type.starts_with("text/event-stream") {
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
        let raw: RawEvents = match aws {
            true => Box::pin(aws_frames(bytes)),
            false => Box::pin(bytes.eventsource().map(|event| match event {
                Ok(e) => Ok(Frame {
                    kind: e.event,
                    data: e.data,
                }),
                Err(EventStreamError::Transport(cut)) => Err(Broken::Cut(cut)),
                Err(e) => Err(Broken::Malformed(e.to_string())),
            })),
        };
        Ok(Streamed::Events(status, Events { raw, status }))
    }
}

/// The frames of an AWS event stream over `bytes`: each message's
/// `:event-type` and its payload as text; an `exception` message is the
/// stream's failure.
fn aws_frames(
    bytes: impl Stream<Item = Result<bytes::Bytes, Cut>> + Send + 'static,
) -> impl Stream<Item = Result<Frame, Broken>> + Send {
    let state = (
        Box::pin(bytes),
        BytesMut::new(),
        MessageFrameDecoder::new(),
        false,
    );
    futures_util::stream::unfold(
        state,
        |(mut bytes, mut buf, mut decoder, ended)| async move {
            if ended {
                return None;
            }
            loop {
                match decoder.decode_frame(&mut buf) {
                    Ok(DecodedFrame::Complete(message)) => {
                        let frame = aws_frame(&message);
                        let ended = frame.is_err();
                        return Some((frame, (bytes, buf, decoder, ended)));
                    }
                    Ok(DecodedFrame::Incomplete) => {}
                    Err(e) => {
                        let broken = Err(Broken::Malformed(e.to_string()));
                        return Some((broken, (bytes, buf, decoder, true)));
                    }
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(cut)) => {
                        return Some((Err(Broken::Cut(cut)), (bytes, buf, decoder, true)));
                    }
                    None if buf.is_empty() => return None,
                    None => {
                        let why = format!("it ends inside a message ({} bytes left)", buf.len());
                        return Some((Err(Broken::Malformed(why)), (bytes, buf, decoder, true)));
                    }
                }
            }
        },
    )
}

/// One decoded AWS event-stream message as a frame, or the exception it
/// carries.
fn aws_frame(message: &Message) -> Result<Frame, Broken> {
    let header = |name: &str| {
        message
            .headers()
            .iter()
            .find(|h| h.name().as_str() == name)
            .and_then(|h| h.value().as_string().ok())
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default()
    };
    let data = String::from_utf8(message.payload().to_vec())
        .map_err(|_| Broken::Malformed("a message's payload is not UTF-8 text".into()))?;
    if header(":message-type") == "exception" {
        let said: Option<crate::usage::ErrorObject> = serde_json::from_str(&data).ok();
        let message = said.and_then(|e| e.message).unwrap_or(data);
        return Err(Broken::Exception(header(":exception-type"), message));
    }
    Ok(Frame {
        kind: header(":event-type"),
        data,
    })
}

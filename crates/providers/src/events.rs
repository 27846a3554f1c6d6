//! A provider's streamed answer: its server-sent events (parsed by the
//! `eventsource-stream` crate), read up to `limits.maxProviderBodyBytes`,
//! and the text they carry relayed with the key kept out of it.

use super::http::HttpClient;
use super::redact::Redactor;
use callai_engine::{FailureKind, ProviderFailure};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde_json::Value;

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

/// How a provider answered a request for a stream.
#[derive(Debug)]
pub(crate) enum Streamed {
    /// As events, each handed over as it came; the HTTP status.
    Events(u16),
    /// With one JSON body (a server that does not stream): the status and
    /// the body, read as a non-streamed answer is.
    Whole(u16, Value),
}

impl HttpClient {
    /// POSTs `body` and reads the answer as server-sent events, handing each
    /// event's data, parsed as JSON, to `on_event` (OpenAI's final
    /// `[DONE]` is left out). A server that answers with one JSON body
    /// instead is read as [`HttpClient::post_json`] reads it.
    pub(crate) async fn post_events(
        &self,
        url: &reqwest::Url,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        on_event: &mut (dyn FnMut(&Value) -> Result<(), ProviderFailure> + Send),
    ) -> Result<Streamed, ProviderFailure> {
        let response = self.post(url, headers, body).await?;
        let status = response.status().as_u16();
        let is_events = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !is_events {
            let (status, value) = self.read_json(response).await?;
            return Ok(Streamed::Whole(status, value));
        }
        let cap = self.max_body();
        let bytes =
            futures_util::stream::unfold((response, 0u64), move |(mut r, read)| async move {
                match r.chunk().await {
                    Ok(Some(chunk)) if read + chunk.len() as u64 > cap => {
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
        let mut events = std::pin::pin!(bytes.eventsource());
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(Cut::Transport(e))) => {
                    return Err(self.transport(&e));
                }
                Err(EventStreamError::Transport(Cut::Over(cap))) => {
                    return Err(ProviderFailure::new(
                        FailureKind::TooLarge,
                        Some(status),
                        format!(
                            "limits.maxProviderBodyBytes: the provider's stream is over {cap} bytes; the rest was not read"
                        ),
                    ));
                }
                Err(e) => {
                    return Err(ProviderFailure::new(
                        FailureKind::Transient,
                        Some(status),
                        format!("the provider's event stream is malformed: {e}"),
                    ));
                }
            };
            if event.data == "[DONE]" {
                continue;
            }
            let data: Value = serde_json::from_str(&event.data).map_err(|e| {
                ProviderFailure::new(
                    FailureKind::Transient,
                    Some(status),
                    format!("an event of the provider's stream is not JSON ({e})"),
                )
            })?;
            on_event(&data)?;
        }
        Ok(Streamed::Events(status))
    }
}

/// Relays streamed text with the key kept out of it. A key (in any
/// encoding the [`Redactor`] knows) has no whitespace in it, so no match can
/// span a whitespace: text is relayed up to its last whitespace, redacted,
/// and the rest waits for the next piece, or the end.
#[derive(Debug)]
pub(crate) struct StreamRedaction<'a> {
    redactor: &'a Redactor,
    pending: String,
}

impl<'a> StreamRedaction<'a> {
    pub(crate) fn new(redactor: &'a Redactor) -> Self {
        Self {
            redactor,
            pending: String::new(),
        }
    }

    /// Takes `text`; what may be relayed now.
    pub(crate) fn push(&mut self, text: &str) -> Option<String> {
        self.pending.push_str(text);
        let cut = self
            .pending
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())?;
        let ready: String = self.pending.drain(..cut).collect();
        Some(self.redactor.redact(&ready).into_owned())
    }

    /// What is left at the end of the stream.
    pub(crate) fn finish(self) -> Option<String> {
        (!self.pending.is_empty()).then(|| self.redactor.redact(&self.pending).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_split_across_pieces_is_redacted_as_a_whole() {
        let key = "sk-test-SUPERSECRET-0248";
        let redactor = Redactor::new(Some(key));
        let mut stream = StreamRedaction::new(&redactor);
        let mut relayed = String::new();
        for piece in ["here is ", "sk-test-SUP", "ERSECRET", "-0248 and", " more"] {
            relayed.extend(stream.push(piece));
        }
        relayed.extend(stream.finish());
        assert!(!relayed.contains("SUPERSECRET"), "{relayed}");
        assert!(!relayed.contains("sk-test-SUP"), "{relayed}");
        assert!(
            relayed.starts_with("here is ") && relayed.ends_with(" more"),
            "{relayed}"
        );
    }
}

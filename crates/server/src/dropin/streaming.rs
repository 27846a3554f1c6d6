//! A text call streamed as its provider streams it: the engine hands each
//! piece of text to a sink, and the client gets it as the API's next event.
//! What comes before the first piece (a refusal, a failure after the host's
//! retries) is an ordinary error answer; once text has gone out, the call is
//! not retried, and its end (usage and `callai.attempts`, or an error
//! event) closes the stream. A client that goes away drops the call: the
//! request in flight is cancelled, and counted.

use super::api::{Framer, Keep, answer_text};
use super::outcome::{CallFailure, run};
use super::sse::{self, Frame};
use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::response::Response;
use callai_engine::wire::CallResult;
use callai_engine::{BoxFuture, DeltaSink, DeltaTarget};
use callai_gateway::Gateway;
use callai_gateway::call::CallPlan;
use callai_gateway::tenants::Caller;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Notify, mpsc};

/// The most text a stream holds for a client that has not read it: past
/// it the call waits (and so does its provider's stream) until the client
/// reads, or the write timeout cuts the connection.
const UNREAD_BYTES: usize = 64 << 10;

/// What the call task sends the stream.
enum Piece {
    Text(String),
    End(Result<CallResult, CallFailure>),
}

/// The text a client has not read yet, in bytes, and who waits for it to
/// go down.
#[derive(Debug, Default)]
struct Unread {
    bytes: AtomicUsize,
    read: Notify,
}

impl Unread {
    /// The client took `n` bytes.
    fn took(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        self.read.notify_waiters();
    }
}

/// Where the call's text goes: queued for the client, the call held back
/// while more than [`UNREAD_BYTES`] are queued.
struct ToClient {
    pieces: mpsc::UnboundedSender<Piece>,
    unread: Arc<Unread>,
}

impl DeltaTarget for ToClient {
    fn push(&self, text: &str) {
        self.unread.bytes.fetch_add(text.len(), Ordering::AcqRel);
        let _ = self.pieces.send(Piece::Text(text.to_owned()));
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let read = self.unread.read.notified();
                tokio::pin!(read);
                read.as_mut().enable();
                if self.unread.bytes.load(Ordering::Acquire) <= UNREAD_BYTES
                    || self.pieces.is_closed()
                {
                    return;
                }
                read.await;
            }
        })
    }
}

/// Runs `call` with its text relayed to the client by `framer`.
pub async fn relay(
    gateway: Arc<Gateway>,
    caller: Caller,
    plan: CallPlan,
    mut framer: impl Framer,
    keep: Option<(Keep, String, String)>,
) -> Result<Response, CallFailure> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Piece>();
    let unread = Arc::new(Unread::default());
    // What queues is bounded by UNREAD_BYTES: the call waits past it.
    let sink = DeltaSink::with_target(ToClient {
        pieces: tx.clone(),
        unread: unread.clone(),
    });
    let task_gateway = gateway.clone();
    gateway.tasks.spawn(async move {
        let gone = tx.clone();
        tokio::select! {
            end = run(&task_gateway, &caller, plan, Some(sink)) => {
                // What is kept of the call is kept before its end goes out.
                if let (Ok((result, _)), Some((keep, id, model))) = (&end, keep) {
                    keep(result, &id, &model).await;
                }
                let _ = tx.send(Piece::End(end.map(|(result, _)| result)));
            }
            // The client went away: dropping the call cancels its request.
            () = gone.closed() => {}
        }
    });
    let first = match rx.recv().await {
        Some(Piece::End(Err(e))) => return Err(e),
        Some(piece) => piece,
        None => {
            let e = ApiError::internal("the call ended without an answer");
            return Err(e.into());
        }
    };
    if let Piece::Text(text) = &first {
        unread.took(text.len());
    }
    let mut frames = framer.start();
    let done = frame_piece(&mut framer, first, &mut frames);
    let initial = Bytes::from(sse::encode(frames));
    let rest = futures_util::stream::unfold(
        (rx, framer, done, unread),
        |(mut rx, mut framer, done, unread)| async move {
            if done {
                return None;
            }
            let piece = rx.recv().await?;
            if let Piece::Text(text) = &piece {
                unread.took(text.len());
            }
            let mut frames = Vec::new();
            let done = frame_piece(&mut framer, piece, &mut frames);
            let bytes = Bytes::from(sse::encode(frames));
            Some((Ok::<_, Infallible>(bytes), (rx, framer, done, unread)))
        },
    );
    let stream = futures_util::StreamExt::chain(
        futures_util::stream::once(async move { Ok::<_, Infallible>(initial) }),
        rest,
    );
    Ok(sse::streaming(Body::from_stream(stream)))
}

/// The frames of a call that has settled (a structured call, a call with
/// tools): those a live stream would give, its whole text as one piece,
/// then its tool calls.
pub fn settled(mut framer: impl Framer, result: &CallResult) -> Vec<Frame> {
    let mut frames = framer.start();
    let text = answer_text(result);
    if !text.is_empty() || result.tool_calls.is_none() {
        frames.extend(framer.text(&text));
    }
    if let Some(calls) = &result.tool_calls {
        frames.extend(framer.tool_calls(calls));
    }
    frames.extend(framer.end(result));
    frames
}

/// Adds `piece`'s frames; whether the stream is over.
fn frame_piece(framer: &mut impl Framer, piece: Piece, frames: &mut Vec<Frame>) -> bool {
    match piece {
        Piece::Text(text) => {
            frames.extend(framer.text(&text));
            false
        }
        Piece::End(Ok(result)) => {
            frames.extend(framer.end(&result));
            true
        }
        Piece::End(Err(e)) => {
            frames.extend(framer.error(&e.error));
            true
        }
    }
}

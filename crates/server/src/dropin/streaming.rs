//! A text call streamed as its provider streams it: the engine hands each
//! piece of text to a sink, and the client gets it as the API's next event.
//! What comes before the first piece (a refusal, a failure after the host's
//! retries) is an ordinary error answer; once text has gone out, the call is
//! not retried, and its end (usage and `callai.attempts`, or an error
//! event) closes the stream. A client that goes away drops the call: the
//! request in flight is cancelled, and counted.

use super::sse::{self, Frame};
use super::{Api, DropinError, run};
use crate::app::AppState;
use crate::body::CallBody;
use crate::tenants::Caller;
use axum::body::{Body, Bytes};
use axum::response::Response;
use callai_engine::DeltaSink;
use callai_engine::wire::CallResult;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;

/// How an API frames a streamed text call.
pub trait Framer: Send + 'static {
    /// The frames before any text.
    fn start(&mut self) -> Vec<Frame>;
    /// The frames of a piece of text.
    fn text(&mut self, text: &str) -> Vec<Frame>;
    /// The frames of the call's end.
    fn end(&mut self, result: &CallResult) -> Vec<Frame>;
    /// The frames of a failure after text went out.
    fn error(&mut self, error: &DropinError) -> Vec<Frame>;
}

/// What the call task sends the stream.
enum Piece {
    Text(String),
    End(Result<CallResult, DropinError>),
}

/// Runs `call` with its text relayed to the client by `framer`.
pub async fn relay(
    state: Arc<AppState>,
    caller: Caller,
    api: Api,
    call: CallBody,
    mut framer: impl Framer,
) -> Result<Response, DropinError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Piece>();
    let to_client = tx.clone();
    // The reply is bounded by limits.maxResponseBytes, so is what queues.
    let sink = DeltaSink::new(move |text: &str| {
        let _ = to_client.send(Piece::Text(text.to_owned()));
    });
    let task_state = state.clone();
    state.tasks.spawn(async move {
        let gone = tx.clone();
        tokio::select! {
            end = run(&task_state, &caller, api, call, Some(sink)) => {
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
            let e = crate::error::ApiError::internal("the call ended without an answer");
            return Err(DropinError::from_api(api, e));
        }
    };
    let mut frames = framer.start();
    let done = frame_piece(&mut framer, first, &mut frames);
    let initial = Bytes::from(sse::encode(frames));
    let rest = futures_util::stream::unfold(
        (rx, framer, done),
        |(mut rx, mut framer, done)| async move {
            if done {
                return None;
            }
            let piece = rx.recv().await?;
            let mut frames = Vec::new();
            let done = frame_piece(&mut framer, piece, &mut frames);
            let bytes = Bytes::from(sse::encode(frames));
            Some((Ok::<_, Infallible>(bytes), (rx, framer, done)))
        },
    );
    let stream = futures_util::StreamExt::chain(
        futures_util::stream::once(async move { Ok::<_, Infallible>(initial) }),
        rest,
    );
    Ok(sse::streaming(Body::from_stream(stream)))
}

/// The frames of a call that has settled (a structured call): those a live
/// stream would give, its whole text as one piece.
pub fn settled(mut framer: impl Framer, result: &CallResult) -> Vec<Frame> {
    let mut frames = framer.start();
    frames.extend(framer.text(&super::answer_text(result)));
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
            frames.extend(framer.error(&e));
            true
        }
    }
}

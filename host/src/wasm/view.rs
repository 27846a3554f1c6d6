//! The `openwop:callai` imports: an owned per-run context and the borrowed
//! view that implements the generated `Host` traits.

use super::bindings::openwop::callai::{ai, log, types};
use super::convert;
use super::runtime::RunError;
use crate::engine::Engine;
use crate::error::CallError;
use crate::events::{Event, EventLog, EventSink};
use crate::request::CallRequest;
use crate::result::CallResult;
use crate::runlog::{Entry, Journal, RecordedCall, Replayed, RunStatus};
use serde_json::{Value, json};
use wasmtime::component::{HasData, Linker};

/// What the `openwop:callai` imports need for one run.
#[derive(Debug)]
pub struct CallAiCtx {
    engine: Engine,
    node_id: String,
    events: EventLog,
    calls: u32,
    journal: Journal,
    abort: Option<RunError>,
}

impl CallAiCtx {
    /// A live context for one run of `node_id`, recording events into `events`.
    pub fn new(engine: Engine, node_id: impl Into<String>, events: EventLog) -> Self {
        Self {
            engine,
            node_id: node_id.into(),
            events,
            calls: 0,
            journal: Journal::Live,
            abort: None,
        }
    }

    /// Records or replays the run's calls through `journal`.
    pub fn with_journal(mut self, journal: Journal) -> Self {
        self.journal = journal;
        self
    }

    /// The calls the pack has made so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The run's events.
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// Settles the run: the reason the host stopped it (a divergence, a run
    /// log that failed) wins over what the guest saw; a replay that made too
    /// few calls diverged; a recorded run is closed with its output.
    pub(super) fn settle(&mut self, result: Result<String, RunError>) -> Result<String, RunError> {
        let mut result = match self.abort.take() {
            Some(abort) => Err(abort),
            None => result,
        };
        if result.is_ok()
            && let Some(reason) = self.journal.missing_calls(self.calls)
        {
            result = Err(self.diverge(self.calls, reason));
        }
        let (status, output) = match &result {
            Ok(out) => (RunStatus::Ok, out.clone()),
            Err(e) => (RunStatus::Failed, e.to_json().to_string()),
        };
        if let Err(e) = self.journal.finish(&self.events, status, &output) {
            result = Err(RunError::RunLog(e.to_string()));
        }
        result
    }

    fn diverge(&mut self, index: u32, reason: String) -> RunError {
        self.events.emit(Event::ReplayDiverged {
            node_id: self.node_id.clone(),
            call_index: index,
            reason: reason.clone(),
        });
        RunError::ReplayDiverged(reason)
    }

    /// Stops the run: the guest traps, and the run reports `error`.
    fn stop(&mut self, error: RunError) -> wasmtime::Error {
        let message = error.to_string();
        self.abort = Some(error);
        wasmtime::Error::msg(message)
    }

    /// One call, through the journal: live, recorded, or served from the
    /// log. The request's key (its recorded form) is only made when the run
    /// is journaled. `Err` stops the run.
    async fn serve(
        &mut self,
        entry: Entry,
        size: usize,
        key: impl FnOnce() -> String,
        request: impl FnOnce() -> Result<CallRequest, CallError>,
    ) -> wasmtime::Result<Result<CallResult, CallError>> {
        let index = self.calls;
        self.calls += 1;
        let limits = self.engine.config().limits;
        if self.calls > limits.max_calls_per_run {
            let message = format!(
                "call {} is over the limit of {} calls per run",
                self.calls, limits.max_calls_per_run
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxCallsPerRun",
                message,
            }));
        }
        if size as u64 > limits.max_request_bytes {
            let message = format!(
                "a request of {size} bytes is over the limit of {}",
                limits.max_request_bytes
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxRequestBytes",
                message,
            }));
        }
        if self.journal.is_replay() {
            return match self
                .journal
                .replay_call(&self.node_id, index, entry, &key())
            {
                Replayed::Served { outcome, events } => {
                    events.into_iter().for_each(|e| self.events.emit(e));
                    split(outcome)
                }
                Replayed::Diverged(reason) => {
                    let error = self.diverge(index, reason);
                    Err(self.stop(error))
                }
            };
        }
        let start = self.events.len();
        let outcome = match request() {
            Ok(request) => {
                self.engine
                    .call(&self.node_id, &request, &self.events)
                    .await
            }
            Err(e) => Err(e),
        };
        if self.journal.is_recording() {
            let call = RecordedCall {
                node_id: self.node_id.clone(),
                index,
                entry,
                request: key(),
                outcome: match &outcome {
                    Ok(result) => json!({ "result": result.to_json() }),
                    Err(error) => json!({ "error": error.to_json() }),
                },
                events: self.events.since(start),
            };
            if let Err(e) = self.journal.commit(&call, &self.events) {
                return Err(self.stop(RunError::RunLog(e.to_string())));
            }
        }
        Ok(outcome)
    }
}

/// A recorded outcome, `{"result": ...}` or `{"error": ...}`, as the call's
/// result. A record that does not parse is a host bug: trap.
fn split(wire: Value) -> wasmtime::Result<Result<CallResult, CallError>> {
    match wire {
        Value::Object(mut o) => match (o.remove("result"), o.remove("error")) {
            (Some(result), None) => Ok(Ok(serde_json::from_value(result)?)),
            (None, Some(error)) => Ok(Err(serde_json::from_value(error)?)),
            _ => Err(wasmtime::Error::msg(
                "a call outcome has neither result nor error",
            )),
        },
        _ => Err(wasmtime::Error::msg("a call outcome is not an object")),
    }
}

/// A borrowed view of a [`CallAiCtx`]; implements the generated host traits.
#[derive(Debug)]
pub struct CallAiView<'a> {
    /// The context.
    pub ctx: &'a mut CallAiCtx,
}

struct HasCallAi;

impl HasData for HasCallAi {
    type Data<'a> = CallAiView<'a>;
}

/// Adds the `openwop:callai` imports to `linker`; `get` finds the view in the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> CallAiView<'_>,
) -> wasmtime::Result<()> {
    types::add_to_linker::<T, HasCallAi>(linker, get)?;
    ai::add_to_linker::<T, HasCallAi>(linker, get)?;
    log::add_to_linker::<T, HasCallAi>(linker, get)
}

impl types::Host for CallAiView<'_> {}

impl ai::Host for CallAiView<'_> {
    async fn call_ai(
        &mut self,
        request: types::CallRequest,
    ) -> wasmtime::Result<Result<types::CallResult, types::CallError>> {
        let honour_retry = self.ctx.engine.config().call_accounting.retry_policy;
        let size = convert::request_size(&request);
        // The typed request's recorded form, its complete and deterministic
        // debug form, is only needed when the run is recorded or replayed.
        let key = match self.ctx.journal {
            Journal::Live => String::new(),
            _ => format!("{request:?}"),
        };
        let outcome = self
            .ctx
            .serve(
                Entry::Typed,
                size,
                || key,
                || convert::request_from_wit(request, honour_retry),
            )
            .await?;
        Ok(outcome
            .map(convert::result_to_wit)
            .map_err(|e| convert::error_to_wit(&e)))
    }

    async fn call_ai_json(
        &mut self,
        request: String,
    ) -> wasmtime::Result<Result<String, types::CallError>> {
        let honour_retry = self.ctx.engine.config().call_accounting.retry_policy;
        let outcome = self
            .ctx
            .serve(
                Entry::Json,
                request.len(),
                || request.clone(),
                || CallRequest::from_json(&request, honour_retry),
            )
            .await?;
        Ok(outcome
            .map(|result| serde_json::to_string(&result).expect("a CallResult always serialises"))
            .map_err(|e| convert::error_to_wit(&e)))
    }

    async fn call_accounting(&mut self) -> wasmtime::Result<types::AccountingFlags> {
        let flags = self.ctx.engine.config().call_accounting;
        Ok(types::AccountingFlags {
            attempts: flags.attempts,
            retry_policy: flags.retry_policy,
        })
    }
}

impl log::Host for CallAiView<'_> {
    async fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        self.ctx.events.emit(Event::PackLog {
            node_id: self.ctx.node_id.clone(),
            level: level.into(),
            message,
        });
        Ok(())
    }
}

//! The `openwop:callai` imports: an owned per-run context and the borrowed
//! view that implements the generated `Host` traits. Each import converts
//! WIT types and hands the call to the run's [`RunSession`].

use crate::bindings::openwop::callai::{ai, log, types};
use crate::stdio::PackStdio;
use callai_engine::Host;
use callai_engine::events::Event;
use callai_engine::{CallInput, Journal, RunError, RunSession};
use callai_wire::{CallError, CallRequest};
use wasmtime::component::{HasData, Linker};

/// What the `openwop:callai` imports need for one run: its session, and
/// why the host stopped the run if it did.
#[derive(Debug)]
pub struct CallAiCtx {
    session: RunSession,
    /// The pack's standard output and error, when the host keeps them.
    stdio: Option<PackStdio>,
}

impl CallAiCtx {
    /// A context for one run of `node_id` on `host`, with `journal`.
    pub fn new(host: Host, node_id: impl Into<String>, journal: Journal) -> Self {
        Self::with_session(RunSession::new(host, node_id, journal))
    }

    /// A context around a session of the caller's making.
    pub fn with_session(session: RunSession) -> Self {
        Self {
            session,
            stdio: None,
        }
    }

    /// Logs what the pack writes to `stdio` with its other log lines.
    pub(crate) fn with_stdio(mut self, stdio: PackStdio) -> Self {
        self.stdio = Some(stdio);
        self
    }

    /// Hands the lines the pack has written since the last time to its
    /// log: before each import, so that they come before what it does
    /// next, and at the end (`end`, the last line without its newline too).
    fn log_stdio(&mut self, end: bool) {
        let Some(stdio) = &self.stdio else {
            return;
        };
        for stream in [&stdio.stdout, &stdio.stderr] {
            for line in stream.take_lines(end) {
                self.session.log(stream.level, line);
            }
        }
    }

    /// The calls the pack has made so far.
    pub fn calls(&self) -> u32 {
        self.session.calls()
    }

    /// Ends the run once the guest's `run` returned (or trapped): closes a
    /// recorded run in its run log, and returns the run's result — the
    /// reason the host stopped it wins over what the guest saw — and its
    /// events. An embedder with its own linker calls this to finish a run.
    pub async fn finish(
        &mut self,
        result: Result<String, RunError>,
    ) -> (Result<String, RunError>, Vec<Event>) {
        self.log_stdio(true);
        self.session.finish(result).await
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

/// Adds the `openwop:callai` imports to `linker`; `get` finds the view in
/// the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> CallAiView<'_>,
) -> wasmtime::Result<()> {
    types::add_to_linker::<T, HasCallAi>(linker, get)?;
    ai::add_to_linker::<T, HasCallAi>(linker, get)?;
    log::add_to_linker::<T, HasCallAi>(linker, get)
}

/// A call the session stopped the run on traps the guest; the session
/// remembers why, and the run reports that.
fn trap(error: RunError) -> wasmtime::Error {
    wasmtime::Error::msg(error.to_string())
}

impl types::Host for CallAiView<'_> {}

impl ai::Host for CallAiView<'_> {
    async fn call_ai(
        &mut self,
        request: types::CallRequest,
    ) -> wasmtime::Result<Result<types::CallResult, types::CallError>> {
        self.ctx.log_stdio(false);
        // A schema that is not even JSON text is refused at the boundary,
        // before it counts as a call.
        let request = match CallRequest::try_from(request) {
            Ok(request) => request,
            Err(e) => return Ok(Err(e.into())),
        };
        let outcome = self
            .ctx
            .session
            .call(CallInput::Typed(request))
            .await
            .map_err(trap)?;
        Ok(outcome.map(Into::into).map_err(Into::into))
    }

    async fn call_ai_json(
        &mut self,
        request: String,
    ) -> wasmtime::Result<Result<String, types::CallError>> {
        self.ctx.log_stdio(false);
        let outcome = self
            .ctx
            .session
            .call(CallInput::Json(request))
            .await
            .map_err(trap)?;
        Ok(outcome
            .map(|result| serde_json::to_string(&result).expect("a CallResult always serialises"))
            .map_err(|e: CallError| e.into()))
    }

    async fn call_accounting(&mut self) -> wasmtime::Result<types::AccountingFlags> {
        Ok(self.ctx.session.call_accounting().into())
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
        self.ctx.log_stdio(false);
        self.ctx.session.log(level, message);
        Ok(())
    }
}

//! The `openwop:callai` imports: an owned per-run context and the borrowed
//! view that implements the generated `Host` traits.

use super::bindings::openwop::callai::{ai, log, types};
use super::convert;
use crate::engine::Engine;
use crate::events::{Event, EventLog, EventSink};
use crate::request::CallRequest;
use wasmtime::component::{HasData, Linker};

/// What the `openwop:callai` imports need for one run.
#[derive(Debug)]
pub struct CallAiCtx {
    engine: Engine,
    node_id: String,
    events: EventLog,
    calls: u32,
}

impl CallAiCtx {
    /// A context for one run of `node_id`, recording events into `events`.
    pub fn new(engine: Engine, node_id: impl Into<String>, events: EventLog) -> Self {
        Self {
            engine,
            node_id: node_id.into(),
            events,
            calls: 0,
        }
    }

    /// The calls the pack has made so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The run's events.
    pub fn events(&self) -> &EventLog {
        &self.events
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
        let outcome = match convert::request_from_wit(request, honour_retry) {
            Ok(request) => self.call(&request).await,
            Err(e) => Err(e),
        };
        Ok(outcome
            .map(convert::result_to_wit)
            .map_err(|e| convert::error_to_wit(&e)))
    }

    async fn call_ai_json(
        &mut self,
        request: String,
    ) -> wasmtime::Result<Result<String, types::CallError>> {
        let honour_retry = self.ctx.engine.config().call_accounting.retry_policy;
        let outcome = match CallRequest::from_json(&request, honour_retry) {
            Ok(request) => self.call(&request).await,
            Err(e) => Err(e),
        };
        Ok(outcome
            .map(|r| r.to_json().to_string())
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

impl CallAiView<'_> {
    async fn call(
        &mut self,
        request: &CallRequest,
    ) -> Result<crate::result::CallResult, crate::error::CallError> {
        self.ctx.calls += 1;
        let ctx = &*self.ctx;
        ctx.engine.call(&ctx.node_id, request, &ctx.events).await
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

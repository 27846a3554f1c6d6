//! The floors: the bench component instantiated by a bare wasmtime engine
//! whose `openwop:callai` imports return a canned result — the same WIT
//! signatures, lifted and lowered the same way, with no host behind them.

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "pack-node",
    imports: { default: async },
    exports: { default: async },
});

use openwop::callai::{ai, log, types};

#[allow(missing_debug_implementations)]
pub struct Canned {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Canned {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// What the real host answers a text call of the bench pack, canned.
fn result(structured: bool) -> types::CallResult {
    types::CallResult {
        content: (!structured).then(|| "ok".to_owned()),
        data: structured.then(|| r#"{"a":1}"#.to_owned()),
        usage: Some(types::Usage {
            input_tokens: None,
            output_tokens: Some(1),
            total_tokens: None,
        }),
        finish_reason: Some(types::FinishReason::Stop),
        model: Some("mock-1".to_owned()),
        attempts: Some(types::Attempts {
            count: 1,
            output_tokens: Some(1),
            usage_complete: true,
            structured_output: structured.then_some(types::StructuredOutput::Native),
        }),
    }
}

impl types::Host for Canned {}

impl ai::Host for Canned {
    async fn call_ai(
        &mut self,
        request: types::CallRequest,
    ) -> Result<types::CallResult, types::CallError> {
        Ok(result(request.response_schema.is_some()))
    }

    async fn call_ai_json(&mut self, _request: String) -> Result<String, types::CallError> {
        Ok(r#"{"content":"ok"}"#.to_owned())
    }

    async fn call_accounting(&mut self) -> types::AccountingFlags {
        types::AccountingFlags {
            attempts: true,
            retry_policy: true,
        }
    }
}

impl log::Host for Canned {
    async fn log(&mut self, _level: log::Level, _message: String) {}
}

/// A bare engine (fuel and epochs on, as the host's, so the guest code costs
/// the same) with the canned imports.
#[allow(missing_debug_implementations)]
pub struct Floor {
    engine: Engine,
    component: Component,
    linker: Linker<Canned>,
}

impl Floor {
    pub fn new(bytes: &[u8]) -> Self {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let component = Component::new(&engine, bytes).unwrap();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        PackNode::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
        Self {
            engine,
            component,
            linker,
        }
    }

    fn store(&self) -> Store<Canned> {
        let mut store = Store::new(
            &self.engine,
            Canned {
                wasi: WasiCtx::builder().build(),
                table: ResourceTable::new(),
            },
        );
        store.set_fuel(u64::MAX).unwrap();
        store.set_epoch_deadline(u64::MAX);
        store
    }

    /// wasmtime's bare `instantiate_async` of the component.
    pub async fn instantiate(&self) {
        let mut store = self.store();
        self.linker
            .instantiate_async(&mut store, &self.component)
            .await
            .unwrap();
    }

    /// Instantiates and runs the node with `input`.
    pub async fn run(&self, input: &str) {
        let mut store = self.store();
        let node = PackNode::instantiate_async(&mut store, &self.component, &self.linker)
            .await
            .unwrap();
        node.call_run(&mut store, input).await.unwrap().unwrap();
    }
}

//! The thin wasm layer: the WIT bindings (generated once, private), the
//! `openwop:callai` imports that convert WIT types and hand each call to the
//! run session, and the component runtime that runs a pack node.

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "pack-node",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    callai_wire::wit_conversions!(openwop::callai::types);
}

mod cache;
mod clocks;
mod limits;
mod runtime;
mod view;

pub use runtime::{Pack, PackRuntime, RunOptions, RunOutput, RuntimeOptions};
pub use view::{CallAiCtx, CallAiView, add_to_linker};

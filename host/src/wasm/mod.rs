//! The thin wasm layer: WIT bindings, the `ctx.callAI` imports, and the
//! component runtime that runs a pack node.

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "pack-node",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

mod cache;
mod convert;
mod limits;
mod runtime;
mod view;

pub use bindings::PackNode;
pub use cache::entry as cache_entry;
pub use runtime::{Pack, PackRuntime, RunError, RunOutput, RuntimeOptions};
pub use view::{CallAiCtx, CallAiView, add_to_linker};

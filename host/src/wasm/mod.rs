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

mod convert;
mod runtime;
mod view;

pub use bindings::PackNode;
pub use runtime::{Pack, PackRuntime, RunError, RunOutput};
pub use view::{CallAiCtx, CallAiView, add_to_linker};

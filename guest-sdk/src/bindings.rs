//! The generated bindings of the `pack-node` world. Private: pack authors
//! use the crate's own API.
#![allow(unsafe_code, missing_docs, missing_debug_implementations)]

wit_bindgen::generate!({
    path: "wit",
    world: "pack-node",
    pub_export_macro: true,
    export_macro_name: "__export_pack_node",
    runtime_path: "callai_sdk::__private::wit_bindgen::rt",
});

callai_wire::wit_conversions!(openwop::callai::types);

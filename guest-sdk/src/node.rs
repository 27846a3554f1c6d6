//! A pack node and its export.

use crate::bindings::openwop::callai::log as wit_log;
use crate::error::NodeError;

/// A pack node: JSON text in, JSON text out.
pub trait Node {
    /// Runs the node once. An `Err` fails the run with its message.
    fn run(input: &str) -> Result<String, NodeError>;
}

/// Exports a [`Node`] as the component's `run`.
///
/// ```ignore
/// struct MyNode;
/// impl callai_sdk::Node for MyNode { /* ... */ }
/// callai_sdk::export_node!(MyNode);
/// ```
#[macro_export]
macro_rules! export_node {
    ($node:ty) => {
        const _: () = {
            struct __CallaiNodeExport;

            impl $crate::__private::Guest for __CallaiNodeExport {
                fn run(input: ::std::string::String) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                    <$node as $crate::Node>::run(&input).map_err(|e| e.to_string())
                }
            }

            $crate::__private::__export_pack_node!(__CallaiNodeExport with_types_in $crate::__private::bindings);
        };
    };
}

/// Diagnostics that the host collects with the run's events.
pub mod log {
    use super::wit_log;

    /// A debug line.
    pub fn debug(message: &str) {
        wit_log::log(wit_log::Level::Debug, message);
    }

    /// An info line.
    pub fn info(message: &str) {
        wit_log::log(wit_log::Level::Info, message);
    }

    /// A warning.
    pub fn warn(message: &str) {
        wit_log::log(wit_log::Level::Warn, message);
    }

    /// An error line.
    pub fn error(message: &str) {
        wit_log::log(wit_log::Level::Error, message);
    }
}

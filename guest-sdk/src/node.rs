//! A pack node, its export, and its log.

use crate::bindings::openwop::callai::log as wit_log;
use crate::error::NodeError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A pack node with typed input and output: the host's JSON input is
/// deserialised into `Input`, and `Output` is serialised back to JSON.
///
/// ```no_run
/// use callai_sdk::{Node, NodeError, Request, call};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize)]
/// struct Question { text: String }
///
/// #[derive(Serialize)]
/// struct Answer { text: String, requests: u32 }
///
/// struct Hello;
///
/// impl Node for Hello {
///     type Input = Question;
///     type Output = Answer;
///
///     fn run(input: Question) -> Result<Answer, NodeError> {
///         let response = call(&Request::new().user(input.text))?;
///         Ok(Answer {
///             text: response.content().unwrap_or_default().into(),
///             requests: response.attempts().map_or(1, |a| a.count),
///         })
///     }
/// }
///
/// callai_sdk::export_node!(Hello);
/// # fn main() {}
/// ```
pub trait Node {
    /// What the node takes (any `serde` type; `serde_json::Value` for anything).
    type Input: DeserializeOwned;
    /// What the node returns.
    type Output: Serialize;
    /// Runs the node once. An `Err` fails the run with its message.
    fn run(input: Self::Input) -> Result<Self::Output, NodeError>;
}

/// A pack node that takes and returns JSON text as it is (a node that
/// passes its input on verbatim, say). Export it with
/// `export_node!(raw MyNode)`.
pub trait RawNode {
    /// Runs the node once. An `Err` fails the run with its message.
    fn run(input: &str) -> Result<String, NodeError>;
}

/// Exports a [`Node`] (`export_node!(MyNode)`) or a [`RawNode`]
/// (`export_node!(raw MyNode)`) as the component's `run`. The pack's `log`
/// crate records go to the host too.
#[macro_export]
macro_rules! export_node {
    (raw $node:ty) => {
        $crate::__export_with!($crate::__private::run_raw::<$node>);
    };
    ($node:ty) => {
        $crate::__export_with!($crate::__private::run_typed::<$node>);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_with {
    ($run:expr) => {
        const _: () = {
            struct __CallaiNodeExport;

            impl $crate::__private::Guest for __CallaiNodeExport {
                fn run(
                    input: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                    $run(input)
                }
            }

            $crate::__private::__export_pack_node!(__CallaiNodeExport with_types_in $crate::__private::bindings);
        };
    };
}

/// What [`crate::export_node!`] runs for a typed node: the input parsed into
/// `N::Input`, the node run, its output serialised. Not called by hand.
#[doc(hidden)]
pub fn run_typed<N: Node>(input: String) -> Result<String, String> {
    install_logger();
    let input: N::Input = serde_json::from_str(&input)
        .map_err(|e| format!("the node's input is not what it takes: {e}"))?;
    let output = N::run(input).map_err(|e| e.to_string())?;
    serde_json::to_string(&output).map_err(|e| format!("the node's output does not serialise: {e}"))
}

/// What [`crate::export_node!`] runs for a node of JSON text. Not called by hand.
#[doc(hidden)]
pub fn run_raw<N: RawNode>(input: String) -> Result<String, String> {
    install_logger();
    N::run(&input).map_err(|e| e.to_string())
}

/// Diagnostics that the host collects with the run's events (`pack.log`).
/// Records of the `log` crate (`log::info!`) arrive here too.
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

/// The `log` crate's backend: every record to the host's `log`.
struct HostLogger;

impl ::log::Log for HostLogger {
    fn enabled(&self, _: &::log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &::log::Record<'_>) {
        let level = match record.level() {
            ::log::Level::Error => wit_log::Level::Error,
            ::log::Level::Warn => wit_log::Level::Warn,
            ::log::Level::Info => wit_log::Level::Info,
            ::log::Level::Debug | ::log::Level::Trace => wit_log::Level::Debug,
        };
        wit_log::log(level, &record.args().to_string());
    }

    fn flush(&self) {}
}

/// Installs [`HostLogger`] once; a pack that set its own logger keeps it.
fn install_logger() {
    static LOGGER: HostLogger = HostLogger;
    if ::log::set_logger(&LOGGER).is_ok() {
        ::log::set_max_level(::log::LevelFilter::Trace);
    }
}

//! The viewer's files, built into the binary.

/// One file the viewer serves under `/ui/`.
#[derive(Debug)]
pub struct Asset {
    /// Its name under `/ui/`.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file, the page first.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("chart.js", JS),
    asset!("calls.js", JS),
    asset!("runs.js", JS),
    asset!("tenants.js", JS),
    asset!("providers.js", JS),
    asset!("keys.js", JS),
];

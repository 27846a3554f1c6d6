//! The errors the API answers with: its own codes and body, and the
//! gateway's errors mapped onto them.

mod api;
mod from_gateway;

pub use api::{ApiCode, ApiError};

//! Reading a request's wire JSON straight into its types, naming the field
//! that is wrong: one pass over the text, no JSON tree of the request
//! (only its `responseSchema`, which is the caller's own JSON).

mod parsed;
mod read;
mod retry;
mod shape;
mod visit;

pub use parsed::ParsedRequest;
pub use retry::ParsedRetry;

#[cfg(test)]
mod tests;

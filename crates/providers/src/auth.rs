//! Authorization made for each request rather than configured once:
//! Vertex AI's bearer tokens, AWS's SigV4 signatures.

use callai_engine::{BoxFuture, ProviderFailure};
use reqwest::header::HeaderMap;

/// What authorizes a provider's requests one at a time.
pub(crate) trait Authorize: Send + Sync + std::fmt::Debug {
    /// Adds the authorization of a POST of `body` to `url` to `headers`;
    /// a failure, before any request, when it cannot be made.
    fn authorize<'a>(
        &'a self,
        url: &'a url::Url,
        headers: &'a mut HeaderMap,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<(), ProviderFailure>>;

    /// The provider answered `status` (401 or 403) to a request it
    /// authorized.
    fn refused(&self, _status: u16) {}
}

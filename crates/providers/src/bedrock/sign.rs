//! AWS Signature Version 4 for Bedrock's requests, by the `aws-sigv4`
//! crate (AWS's own signer): each request's method, URL, headers and
//! body hashed and signed for the service `bedrock` in the provider's
//! region, with the credentials of [`Keys`].

use super::credentials::Keys;
use crate::auth::Authorize;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use callai_engine::{BoxFuture, FailureKind, ProviderFailure};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::fmt;
use std::time::SystemTime;

/// A signer of one provider's requests.
pub(crate) struct Signer {
    keys: Keys,
    region: String,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for `region` with `keys`.
    pub(crate) fn new(region: &str, keys: Keys) -> Self {
        Self {
            keys,
            region: region.to_owned(),
        }
    }

    /// Signs a POST of `body` to `url` with `headers`, adding the
    /// signature's headers (`authorization`, `x-amz-date`, the session
    /// token's) to them.
    fn sign(
        &self,
        credentials: Credentials,
        url: &url::Url,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), String> {
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("bedrock")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let signed: Vec<(&str, &str)> = headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let request = SignableRequest::new(
            "POST",
            url.as_str(),
            signed.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| e.to_string())?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| e.to_string())?
            .into_parts();
        let (added, _) = instructions.into_parts();
        for header in added {
            let mut value = HeaderValue::from_str(header.value()).map_err(|e| e.to_string())?;
            value.set_sensitive(header.sensitive() || header.name() == "authorization");
            headers.insert(HeaderName::from_static(header.name()), value);
        }
        Ok(())
    }
}

impl Authorize for Signer {
    fn authorize<'a>(
        &'a self,
        url: &'a url::Url,
        headers: &'a mut HeaderMap,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<(), ProviderFailure>> {
        Box::pin(async move {
            let credentials = self.keys.current().await?;
            self.sign(credentials, url, headers, body).map_err(|why| {
                let why = format!("the request could not be signed: {why}");
                ProviderFailure::new(FailureKind::Unanswerable, None, why)
            })
        })
    }

    fn refused(&self, _status: u16) {
        self.keys.refused();
    }
}

//! The bearer token of `[server] tokenEnv`, and the rule that keeps a
//! server without one on the loopback interface.

use crate::dropin::{Api, DropinError};
use crate::error::{ApiCode, ApiError};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The paths anyone may read: liveness and discovery.
const OPEN_PATHS: [&str; 2] = ["/healthz", "/.well-known/openwop"];

/// The token requests must carry, if any.
#[derive(Clone)]
pub struct Auth {
    token: Option<Arc<str>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("Auth")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Auth {
    /// No token: anyone who can connect may call.
    pub fn open() -> Self {
        Self { token: None }
    }

    /// Requests must carry `Authorization: Bearer <token>`.
    pub fn bearer(token: &str) -> Self {
        Self {
            token: Some(token.into()),
        }
    }

    /// The auth of `token_env` (a variable name; empty for none), read
    /// through `env`, for a server listening on `listen`. Without a token a
    /// server listens on loopback only.
    pub fn from_env(
        token_env: &str,
        listen: SocketAddr,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        if token_env.is_empty() {
            if !listen.ip().is_loopback() {
                return Err(format!(
                    "server.tokenEnv: refusing to listen on {listen} without a bearer token; \
                     set [server] tokenEnv to a variable holding one, or listen on 127.0.0.1 / [::1]"
                ));
            }
            return Ok(Self::open());
        }
        match env(token_env) {
            Some(token) if !token.trim().is_empty() => Ok(Self::bearer(token.trim())),
            _ => Err(format!(
                "server.tokenEnv: the variable {token_env} holds no token"
            )),
        }
    }

    /// Whether `header` (the `Authorization` value) carries the token.
    fn admits(&self, header: Option<&[u8]>) -> bool {
        // The scheme is case-insensitive (RFC 9110 §11.1), the token is not.
        let given = header.and_then(|h| {
            let (scheme, token) = h.split_at_checked(7)?;
            scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
        });
        self.admits_token(given)
    }

    /// Whether `given` (a bare token, as the Anthropic clients send it in
    /// `x-api-key`) is the token.
    fn admits_token(&self, given: Option<&[u8]>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let Some(given) = given else {
            return false;
        };
        // Compared in constant time, so the time taken does not tell how
        // much of a guess was right.
        bool::from(given.ct_eq(token.as_bytes()))
    }
}

/// The middleware: 401 with a JSON error when the token is missing or wrong,
/// in the shape of the API the path belongs to. `/v1/messages` also takes
/// the token in `x-api-key`, where the Anthropic clients send it.
pub async fn require_token(
    State(auth): State<Auth>,
    request: Request,
    next: Next,
) -> Result<Response, Response> {
    let path = request.uri().path();
    let headers = request.headers();
    let header = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let api_key = match path {
        "/v1/messages" => headers.get("x-api-key").map(|v| v.as_bytes()),
        _ => None,
    };
    let admitted = auth.admits(header) || (api_key.is_some() && auth.admits_token(api_key));
    if OPEN_PATHS.contains(&path) || admitted {
        return Ok(next.run(request).await);
    }
    let mut error = ApiError::new(
        ApiCode::Unauthorized,
        "this server needs `Authorization: Bearer <token>`",
    );
    if header.is_some() || api_key.is_some() {
        error.message = "the bearer token is not this server's".into();
    }
    Err(match path {
        "/v1/chat/completions" | "/v1/models" => {
            DropinError::from_api(Api::OpenAi, error).into_response()
        }
        "/v1/messages" => DropinError::from_api(Api::Anthropic, error).into_response(),
        _ => error.into_response(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_a_token_only_loopback() {
        let none = |_: &str| None;
        assert!(Auth::from_env("", addr("127.0.0.1:0"), none).is_ok());
        assert!(Auth::from_env("", addr("[::1]:0"), none).is_ok());
        let e = Auth::from_env("", addr("0.0.0.0:8080"), none).unwrap_err();
        assert!(
            e.contains("server.tokenEnv") && e.contains("0.0.0.0:8080"),
            "{e}"
        );
        let e = Auth::from_env("TOKEN", addr("127.0.0.1:0"), none).unwrap_err();
        assert!(e.contains("TOKEN"), "{e}");
        let some = |_: &str| Some("s3cret".to_owned());
        assert!(Auth::from_env("TOKEN", addr("0.0.0.0:8080"), some).is_ok());
    }

    #[test]
    fn the_token_must_match_exactly() {
        let auth = Auth::bearer("s3cret");
        // Issue 22 #17: the scheme in any case.
        for right in [&b"Bearer s3cret"[..], b"bearer s3cret", b"BEARER s3cret"] {
            assert!(
                auth.admits(Some(right)),
                "{:?}",
                String::from_utf8_lossy(right)
            );
        }
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret!",
            b"Bearer S3CRET",
            b"Basic s3cret",
            b"Bearers3cret",
            b"s3cret",
            b"",
        ] {
            assert!(
                !auth.admits(Some(wrong)),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(!auth.admits(None));
        assert!(Auth::open().admits(None));
        assert!(!format!("{auth:?}").contains("s3cret"));
    }
}

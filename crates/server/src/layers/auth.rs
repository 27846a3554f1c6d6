//! The bearer tokens: `[server] tokenEnv`'s (the admin) and each tenant's,
//! resolved to the [`Caller`] of every request, and the rule that keeps a
//! server without any token on the loopback interface.

use super::access_log::Answered;
use super::around::{Around, Before};
use super::browser::BrowserGuard;
use crate::error::{ApiCode, ApiError};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use callai_gateway::tenants::{ADMIN, Caller, Tenant, Tenants};
use std::net::SocketAddr;
use std::sync::Arc;

/// Who may call: every caller's token, checked on each request; on a
/// server without any token, what a browser's request must be instead.
#[derive(Debug, Clone)]
pub struct Auth {
    tenants: Arc<Tenants>,
    /// Where the token may be besides `Authorization`.
    key_header: KeyHeader,
    /// A server without tokens: what it refuses of a browser.
    guard: Option<BrowserGuard>,
}

/// Whether a route's callers may send their token in `x-api-key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyHeader {
    /// Only `Authorization: Bearer`.
    None,
    /// `x-api-key` too, where the Anthropic clients send it.
    XApiKey,
}

/// Where a server with no token at all (no admin's, no tenant's) may
/// listen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpenListen {
    /// On loopback only: anything else is refused at start-up.
    #[default]
    LoopbackOnly,
    /// Anywhere (`callai serve --allow-open`): whoever reaches the address
    /// is the admin, as behind a proxy that checks callers itself.
    Anywhere,
}

/// The admin's token (`[server] tokenEnv`, a variable name; empty for none),
/// read through `env`, for a server listening on `listen`. A server with no
/// token at all (no admin's, no tenant's) listens on loopback only, unless
/// `open` says anywhere.
pub fn admin_token(
    token_env: &str,
    listen: SocketAddr,
    tenants: usize,
    open: OpenListen,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    if token_env.is_empty() {
        if tenants == 0 && !listen.ip().is_loopback() && open == OpenListen::LoopbackOnly {
            return Err(format!(
                "server.tokenEnv: refusing to listen on {listen} without a bearer token; \
                 set [server] tokenEnv to a variable holding one, listen on 127.0.0.1 / [::1], \
                 or pass --allow-open if a proxy in front checks every caller"
            ));
        }
        return Ok(None);
    }
    server_token("server.tokenEnv", token_env, env)
}

/// The token the variable `name` (the value of config key `key`; empty for
/// none) holds, read through `env`: a variable named but unset or empty
/// stops start-up.
pub fn server_token(
    key: &str,
    name: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    if name.is_empty() {
        return Ok(None);
    }
    match env(name) {
        Some(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_owned())),
        _ => Err(format!("{key}: the variable {name} holds no token")),
    }
}

impl Auth {
    /// The auth of `tenants`; with no token at all, `allowed_hosts` (`[server]
    /// allowedHosts`) are the names a browser may call it by.
    pub fn new(tenants: Arc<Tenants>, allowed_hosts: &[String]) -> Self {
        let guard = tenants.open().then(|| BrowserGuard::new(allowed_hosts));
        Self {
            tenants,
            key_header: KeyHeader::None,
            guard,
        }
    }

    /// The same callers, whose token may also come in `x-api-key`.
    pub fn with_api_key(self) -> Self {
        Self {
            key_header: KeyHeader::XApiKey,
            ..self
        }
    }

    /// The caller whose token `header` (the `Authorization` value) carries.
    fn bearer(&self, header: Option<&[u8]>) -> Option<Arc<Tenant>> {
        self.tenants.resolve(bearer_token(header)?)
    }
}

/// Marks an answer of a caller's own (behind its token, or a server's
/// without any) as no one else's: no browser or proxy keeps it
/// (`Cache-Control: no-store`, over a stream's `no-cache` too), and no
/// browser reads it as another type than it says.
fn private(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// The token of an `Authorization` value: the scheme is case-insensitive
/// (RFC 9110 §11.1), the token is not.
fn bearer_token(header: Option<&[u8]>) -> Option<&[u8]> {
    header.and_then(|h| {
        let (scheme, token) = h.split_at_checked(7)?;
        scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
    })
}

/// The middleware of `/metrics`: every tenant's figures, so it takes the
/// admin's token or `[server] metricsTokenEnv`'s (a tenant reads its own
/// through `/v1/budget`), or nothing on a server without tokens. A
/// tenant's token is `403`, no token or an unknown one `401`.
pub async fn require_metrics_token(
    State(auth): State<Auth>,
    request: Request,
    next: Next,
) -> Result<Response, Response> {
    let given = bearer_token(
        request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
    );
    if let Some(refused) = auth.guard.as_ref().and_then(|g| g.refusal(&request)) {
        return Err(refused.into_response());
    }
    let reads = auth.tenants.open()
        || given.is_some_and(|t| auth.tenants.is_metrics_token(t))
        || given
            .and_then(|t| auth.tenants.resolve(t))
            .is_some_and(|c| c.name == ADMIN);
    if reads {
        let mut response = next.run(request).await;
        private(&mut response);
        return Ok(response);
    }
    let error = match given.and_then(|t| auth.tenants.resolve(t)) {
        Some(_) => ApiError::new(
            ApiCode::Forbidden,
            "/metrics shows every tenant's figures: it takes the admin's token or the metrics \
             token; a tenant reads its own at /v1/budget",
        ),
        None if given.is_some() => ApiError::new(
            ApiCode::Unauthorized,
            "the bearer token is not this server's",
        ),
        None => ApiError::new(
            ApiCode::Unauthorized,
            "this server needs `Authorization: Bearer <token>`",
        ),
    };
    Err(error.into_response())
}

/// The token check of a router's routes: puts the [`Caller`] on each
/// request, or answers 401 when the token is missing or is nobody's (in
/// the shape of the API whose routes it guards: their layer gives it); the
/// caller goes on the response too, for its log line.
impl Around for Auth {
    type Carry = Arc<Tenant>;

    fn before(&self, request: &mut Request) -> Before<Arc<Tenant>> {
        if let Some(refused) = self.guard.as_ref().and_then(|g| g.refusal(request)) {
            return Before::Stop(refused.into_response());
        }
        match self.caller(request) {
            Ok(caller) => {
                request.extensions_mut().insert(Caller(caller.clone()));
                Before::Go(caller)
            }
            Err(message) => {
                Before::Stop(ApiError::new(ApiCode::Unauthorized, message).into_response())
            }
        }
    }

    fn after(caller: Arc<Tenant>, mut response: Response) -> Response {
        private(&mut response);
        response.extensions_mut().insert(Answered(caller));
        response
    }
}

impl Auth {
    /// The caller whose token `request` carries, or why it has none (its
    /// 401's message).
    fn caller(&self, request: &Request) -> Result<Arc<Tenant>, &'static str> {
        let headers = request.headers();
        let header = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        let api_key = match self.key_header {
            KeyHeader::XApiKey => headers.get("x-api-key").map(|v| v.as_bytes()),
            KeyHeader::None => None,
        };
        let caller = if self.tenants.open() {
            Some(self.tenants.admin().clone())
        } else {
            self.bearer(header)
                .or_else(|| api_key.and_then(|k| self.tenants.resolve(k)))
        };
        if let Some(caller) = caller {
            return Ok(caller);
        }
        Err(if header.is_some() || api_key.is_some() {
            "the bearer token is not this server's"
        } else {
            "this server needs `Authorization: Bearer <token>`"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::{Host, HostConfig};
    use callai_gateway::tenants::ServerTokens;

    const LOOPBACK: OpenListen = OpenListen::LoopbackOnly;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_a_token_only_loopback() {
        let none = |_: &str| None;
        assert_eq!(
            admin_token("", addr("127.0.0.1:0"), 0, LOOPBACK, none),
            Ok(None)
        );
        assert_eq!(
            admin_token("", addr("[::1]:0"), 0, LOOPBACK, none),
            Ok(None)
        );
        let e = admin_token("", addr("0.0.0.0:8080"), 0, LOOPBACK, none).unwrap_err();
        assert!(
            e.contains("server.tokenEnv") && e.contains("0.0.0.0:8080"),
            "{e}"
        );
        // Tenants carry tokens of their own: every request needs one.
        assert_eq!(
            admin_token("", addr("0.0.0.0:8080"), 1, LOOPBACK, none),
            Ok(None)
        );
        // An operator whose proxy checks callers says so.
        assert_eq!(
            admin_token("", addr("0.0.0.0:8080"), 0, OpenListen::Anywhere, none),
            Ok(None)
        );
        let e = admin_token("TOKEN", addr("127.0.0.1:0"), 0, LOOPBACK, none).unwrap_err();
        assert!(e.contains("TOKEN"), "{e}");
        let some = |_: &str| Some("s3cret".to_owned());
        assert_eq!(
            admin_token("TOKEN", addr("0.0.0.0:8080"), 0, LOOPBACK, some),
            Ok(Some("s3cret".into()))
        );
    }

    #[test]
    fn the_token_must_match_exactly() {
        let host = Host::builder(HostConfig::default()).build().unwrap();
        let tokens = ServerTokens {
            admin: Some("s3cret"),
            metrics: None,
        };
        let tenants = Tenants::new(&host, tokens, &Default::default(), &|_| None).unwrap();
        let auth = Auth::new(Arc::new(tenants), &[]);
        // Issue 22 #17: the scheme in any case.
        for right in [&b"Bearer s3cret"[..], b"bearer s3cret", b"BEARER s3cret"] {
            assert!(
                auth.bearer(Some(right)).is_some(),
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
                auth.bearer(Some(wrong)).is_none(),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(auth.bearer(None).is_none());
        assert!(!format!("{auth:?}").contains("s3cret"));
    }
}

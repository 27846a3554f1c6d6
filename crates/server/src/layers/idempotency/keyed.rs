//! The keyed path: a request's key claimed (or its answer replayed, or a
//! mismatch refused), the request run, its answer kept for its repeats.

use crate::error::{ApiCode, ApiError};
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use callai_engine::budget::{KeyClaim, KeyState, StoredAnswer};
use callai_gateway::Gateway;
use callai_gateway::tenants::Caller;
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tower::{Service, ServiceExt};

/// The header.
pub(super) const HEADER: &str = "idempotency-key";
/// Set on an answer served from the log.
pub(super) const REPLAYED: &str = "idempotent-replayed";
/// The longest key (Stripe's and the IETF draft's practice).
const MAX_KEY: usize = 255;
/// The most of an answer kept for its repeats; a longer one is answered
/// but not kept (its key is released).
const MAX_KEPT: usize = 64 << 20;

/// Answers that are not a settled outcome and must not be repeated: the
/// body did not arrive, the budget was full, the host failed or was full.
fn kept(status: StatusCode) -> bool {
    !matches!(status.as_u16(), 408 | 429 | 500 | 503)
}

/// The middleware's state: the gateway, and the endpoint label under
/// which a client's own retry answered from the log is counted (a
/// drop-in's; `None` elsewhere).
#[derive(Debug, Clone)]
pub struct Keyed {
    /// The gateway.
    pub gateway: Arc<Gateway>,
    /// `callai_client_retries_total`'s `endpoint`, on a drop-in.
    pub client_retries: Option<&'static str>,
    /// Whether the response cache answers its requests (a call's or a
    /// drop-in's; never a run's), when `[responseCache]` is on.
    pub cacheable: bool,
}

/// A request with an `Idempotency-Key` ([`KeyedLayer`] hands only those
/// here), run by `route` once its key is claimed. Its own refusals are
/// [`ApiError`]s, given their API's shape by the route's layer.
pub(super) async fn keyed<S>(keyed: Keyed, request: Request, route: S) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let run = |request: Request| async move {
        let Ok(response) = route.oneshot(request).await;
        response
    };
    let Some(value) = request.headers().get(HEADER) else {
        return run(request).await;
    };
    let state = keyed.gateway.clone();
    let path = request.uri().path().to_owned();
    let refuse = |message: String| ApiError::invalid("Idempotency-Key", message).into_response();
    let key = match visible_ascii(value.as_bytes()) {
        Some(key) if !key.is_empty() && key.len() <= MAX_KEY => key.to_owned(),
        _ => {
            return refuse(format!(
                "must be 1 to {MAX_KEY} visible ASCII characters (no space, tab or control character)"
            ));
        }
    };
    let Some(log) = state.runlog.clone() else {
        return refuse("this host keeps no run log ([runlog] url), so it keeps no keys".into());
    };
    if log.ledger().is_none() {
        return refuse("this host's run log keeps no keys".into());
    }
    let (caller, parts, bytes) = match read(&state, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let sha = fingerprint(&path, &parts.headers, &bytes);
    let claim = KeyClaim {
        tenant: &caller.0.name,
        key: &key,
        request_sha256: &sha,
        owner: &state.lease_owner,
        ttl: claim_ttl(&state),
        keep: state.runlog_config.idempotency_keep(),
    };
    let ledger = log.ledger().expect("checked above");
    if let Err(answered) = claim_key(ledger, &claim, &keyed, &parts.headers).await {
        return answered;
    }
    let held = Held {
        state: state.clone(),
        tenant: caller.0.name.clone(),
        key,
        armed: true,
    };
    let response = run(Request::from_parts(parts, Body::from(bytes))).await;
    keep(response, held).await
}

/// `request`'s caller (the admin when no token named one), its parts, and
/// its body read within `[server] maxBodyBytes`; or the refusal to answer.
pub(super) async fn read(
    gateway: &Gateway,
    request: Request,
) -> Result<(Caller, axum::http::request::Parts, Bytes), Response> {
    let caller = (request.extensions().get::<Caller>().cloned())
        .unwrap_or_else(|| Caller(gateway.tenants.admin().clone()));
    let (parts, body) = request.into_parts();
    let probe = Request::from_parts(parts.clone(), body);
    match crate::body::bytes(Bytes::from_request(probe, &()).await, "server.maxBodyBytes") {
        Ok(bytes) => Ok((caller, parts, bytes)),
        Err(e) => Err(e.into_response()),
    }
}

/// How long a claim holds its key while its request runs: a call's wall
/// time and a lease (a host that died holding it lets it lapse).
pub(super) fn claim_ttl(gateway: &Gateway) -> Duration {
    Duration::from_millis(gateway.config().limits.wall_ms) + gateway.runlog_config.lease()
}

/// Claims `claim`'s key: `Ok` once this request holds it; the answer to
/// give instead when the key is answered already (its answer), names
/// another request, or the ledger failed. While the first request with the
/// key is still going on, waits for it: its answer is this one's (its
/// claim lapses if its host dies).
async fn claim_key(
    ledger: &dyn callai_engine::budget::Ledger,
    claim: &KeyClaim<'_>,
    keyed: &Keyed,
    headers: &axum::http::HeaderMap,
) -> Result<(), Response> {
    let mut wait = Duration::from_millis(10);
    loop {
        match ledger.claim_key(claim).await {
            Ok(KeyState::Claimed) => return Ok(()),
            Ok(KeyState::Answered(answer)) => {
                // A client's own retry answered here is still one.
                if let Some(endpoint) = keyed.client_retries {
                    let resent = crate::call_headers::client_retry(headers);
                    crate::dropin::count_client_retry(&keyed.gateway, endpoint, resent);
                }
                return Err(replay(answer));
            }
            Ok(KeyState::Mismatch) => {
                let e = ApiError::new(
                    ApiCode::IdempotencyMismatch,
                    format!(
                        "Idempotency-Key {:?} was sent with another request; a key names one request",
                        claim.key
                    ),
                )
                .with_detail("field", "Idempotency-Key");
                return Err(e.into_response());
            }
            Ok(KeyState::Running) => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(250));
            }
            Err(e) => return Err(ApiError::internal(e.to_string()).into_response()),
        }
    }
}

/// Keeps `response` as the key's answer (a stream once it has ended) and
/// passes it on; one that is not a settled outcome releases the key.
pub(super) async fn keep(response: Response, held: Held) -> Response {
    if !kept(response.status()) {
        held.release();
        return response;
    }
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let (parts, body) = response.into_parts();
    let status = parts.status.as_u16();
    let headers = kept_headers(&parts.headers);
    if streamed {
        return Response::from_parts(parts, tee(body, held, status, headers));
    }
    match axum::body::to_bytes(body, MAX_KEPT).await {
        Ok(bytes) => {
            held.keep(StoredAnswer {
                status,
                headers,
                body: bytes.to_vec(),
            })
            .await;
            Response::from_parts(parts, Body::from(bytes))
        }
        Err(e) => {
            held.release();
            ApiError::internal(format!("the answer could not be kept: {e}")).into_response()
        }
    }
}

/// `bytes` when every one is visible ASCII (`!` to `~`).
fn visible_ascii(bytes: &[u8]) -> Option<&str> {
    bytes
        .iter()
        .all(|b| (b'!'..=b'~').contains(b))
        .then(|| std::str::from_utf8(bytes).expect("ASCII"))
}

/// What a key is bound to: the endpoint, the body, and every `x-callai-*`
/// header of the request (the per-call policy: another
/// `x-callai-max-attempts` is another request). Each part after a NUL,
/// which no JSON body holds; a request without such headers hashes as
/// keys stored before they counted did.
pub(super) fn fingerprint(path: &str, headers: &axum::http::HeaderMap, body: &[u8]) -> String {
    let mut digest = Sha256::new();
    digest.update(path.as_bytes());
    digest.update([0]);
    digest.update(body);
    let mut policy: Vec<(&str, &[u8])> = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-callai-"))
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    policy.sort();
    for (name, value) in policy {
        digest.update([0]);
        digest.update(name.as_bytes());
        digest.update([0]);
        digest.update(value);
    }
    hex::encode(digest.finalize())
}

/// The headers a repeat gets again: all but those of the connection and
/// the framing.
fn kept_headers(headers: &axum::http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "connection" | "date" | "keep-alive"
            )
        })
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// A kept answer, sent again.
pub(super) fn replay(answer: StoredAnswer) -> Response {
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(name, value);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// A claimed key: answered when its answer is kept, released when its
/// request ends without one (dropped, refused, cut short).
pub(super) struct Held {
    state: Arc<Gateway>,
    tenant: String,
    key: String,
    armed: bool,
}

impl Held {
    /// `tenant`'s `key`, claimed: released unless answered.
    pub(super) fn new(state: Arc<Gateway>, tenant: String, key: String) -> Self {
        Self {
            state,
            tenant,
            key,
            armed: true,
        }
    }

    async fn keep(mut self, answer: StoredAnswer) {
        self.armed = false;
        let Some(ledger) = self.state.runlog.as_ref().and_then(|l| l.ledger()) else {
            return;
        };
        if let Err(e) = ledger.answer_key(&self.tenant, &self.key, &answer).await {
            eprintln!(
                "callai serve: cannot keep the answer of Idempotency-Key {:?}: {e}",
                self.key
            );
            let _ = ledger.release_key(&self.tenant, &self.key).await;
        }
    }

    fn release(self) {
        // Drop does it.
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (state, tenant, key) = (self.state.clone(), self.tenant.clone(), self.key.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(ledger) = state.runlog.as_ref().and_then(|l| l.ledger()) {
                    let _ = ledger.release_key(&tenant, &key).await;
                }
            });
        }
    }
}

/// A streamed answer, passed on as it goes and kept once it has ended; a
/// stream dropped before its end (the client went away) releases the key.
fn tee(body: Body, held: Held, status: u16, headers: Vec<(String, String)>) -> Body {
    struct Tee {
        body: axum::body::BodyDataStream,
        kept: Vec<u8>,
        held: Option<Held>,
        status: u16,
        headers: Vec<(String, String)>,
    }
    let tee = Tee {
        body: body.into_data_stream(),
        kept: Vec::new(),
        held: Some(held),
        status,
        headers,
    };
    let stream = futures_util::stream::unfold(tee, |mut tee| async move {
        use futures_util::StreamExt;
        match tee.body.next().await {
            Some(Ok(chunk)) => {
                if tee.kept.len() + chunk.len() <= MAX_KEPT {
                    tee.kept.extend_from_slice(&chunk);
                } else {
                    // Too long to keep: answered, not repeated.
                    tee.held.take();
                }
                Some((Ok::<_, axum::Error>(chunk), tee))
            }
            Some(Err(e)) => {
                tee.held.take();
                Some((Err(e), tee))
            }
            None => {
                if let Some(held) = tee.held.take() {
                    let answer = StoredAnswer {
                        status: tee.status,
                        headers: std::mem::take(&mut tee.headers),
                        body: std::mem::take(&mut tee.kept),
                    };
                    held.keep(answer).await;
                }
                None
            }
        }
    });
    Body::from_stream(stream)
}

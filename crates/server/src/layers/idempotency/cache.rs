//! The response cache (`[responseCache] mode = "exact"`, issue 53, item 5):
//! a request without an `Idempotency-Key` to a call or a drop-in is keyed
//! by its own fingerprint (the one a key is bound to: the endpoint, the
//! body, the policy headers), in its tenant's keys. A repeat within `ttl`
//! gets the first answer byte for byte (its recorded `attempts` with it,
//! streamed or not), no provider request and no charge, marked
//! `x-callai-cache: hit`; an identical request while the first is running
//! waits for it. Only a `200` is kept. `Cache-Control: no-cache` skips it.
//! A ledger that fails makes the request run uncached, never fail.

use super::keyed::{Held, Keyed, claim_ttl, fingerprint, keep, read, replay};
use crate::cache_mark::CacheMiss;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use callai_engine::budget::{KeyClaim, KeyState};
use callai_engine::wire::Attempts;
use callai_gateway::traces::{CacheHit, CallTrace};
use std::convert::Infallible;
use std::time::Duration;
use tower::{Service, ServiceExt};

/// The header that says a cached answer.
const CACHE: &str = "x-callai-cache";

/// Records the trace of a request of `tenant` answered from the cache at
/// `asked` with an answer of `headers`: the call it was first given by
/// (its `x-callai-call-id`), with that call's `attempts` (from the answer's
/// headers, else the call's own trace).
fn trace_hit(keyed: &Keyed, tenant: &str, headers: &HeaderMap, asked: (u64, std::time::Instant)) {
    let gateway = &keyed.gateway;
    let from = headers
        .get(crate::headers::CALL_ID)
        .and_then(|v| v.to_str().ok());
    let attempts = crate::headers::attempts_of(headers)
        .or_else(|| Some(gateway.calls.get(Some(tenant), from?)?.attempts))
        .unwrap_or(Attempts {
            count: 0,
            output_tokens: None,
            usage_complete: true,
            structured_output: None,
        });
    let id = callai_gateway::ids::fresh_id("call_");
    gateway.calls.record(CallTrace::cache_hit(CacheHit {
        id: &id,
        tenant,
        endpoint: keyed.client_retries.unwrap_or("call"),
        from,
        attempts,
        started_ms: asked.0,
        duration_ms: u64::try_from(asked.1.elapsed().as_millis()).unwrap_or(u64::MAX),
    }));
}

/// Whether `request`, which carries no key, goes through the response
/// cache on a route of `keyed`.
pub(super) fn caches(keyed: &Keyed, request: &Request) -> bool {
    keyed.cacheable && keyed.gateway.response_cache.on() && !skipped(request.headers())
}

/// Whether `headers` ask for a fresh answer (`Cache-Control: no-cache` or
/// `no-store`).
fn skipped(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|d| matches!(d.trim(), "no-cache" | "no-store"))
}

/// A request without a key, through the cache, run by `route` when the
/// cache has no answer for it.
pub(super) async fn cached<S>(keyed: Keyed, request: Request, route: S) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let run = |request: Request| async move {
        let Ok(response) = route.oneshot(request).await;
        response
    };
    let gateway = keyed.gateway.clone();
    let Some(ledger) = gateway.runlog.as_ref().and_then(|l| l.ledger()) else {
        return run(request).await;
    };
    let path = request.uri().path().to_owned();
    let (caller, parts, bytes) = match read(&gateway, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let sha = fingerprint(&path, &parts.headers, &bytes);
    let key = format!("cache:{sha}");
    let claim = KeyClaim {
        tenant: &caller.0.name,
        key: &key,
        request_sha256: &sha,
        owner: &gateway.lease_owner,
        ttl: claim_ttl(&gateway),
        keep: gateway.response_cache.ttl(),
    };
    let asked = (callai_engine::events::now_ms(), std::time::Instant::now());
    let request = |bytes| Request::from_parts(parts.clone(), Body::from(bytes));
    let mut wait = Duration::from_millis(10);
    loop {
        match ledger.claim_key(&claim).await {
            Ok(KeyState::Claimed) => break,
            Ok(KeyState::Answered(answer)) => {
                gateway.metrics.response_cache(true);
                let mut response = replay(answer);
                let headers = response.headers_mut();
                headers.remove(super::keyed::REPLAYED);
                headers.insert(CACHE, HeaderValue::from_static("hit"));
                trace_hit(&keyed, &caller.0.name, headers, asked);
                return response;
            }
            Ok(KeyState::Running) => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(250));
            }
            // A fingerprint names one request: no mismatch can come; a
            // ledger that failed leaves the request to run uncached.
            Ok(KeyState::Mismatch) => return run(request(bytes)).await,
            Err(e) => {
                eprintln!("callai serve: the response cache is unavailable: {e}");
                return run(request(bytes)).await;
            }
        }
    }
    let held = Held::new(gateway.clone(), caller.0.name.clone(), key);
    // Looked up and not found: its trace says `miss`.
    let mut looked_up = request(bytes);
    looked_up.extensions_mut().insert(CacheMiss);
    let mut response = run(looked_up).await;
    if response.status() != StatusCode::OK {
        // An error is not an answer to give again: the key is released.
        drop(held);
        return response;
    }
    gateway.metrics.response_cache(false);
    let miss = HeaderValue::from_static("miss");
    response.headers_mut().insert(CACHE, miss);
    // What is kept says `miss`; a repeat is told `hit` when it is given.
    keep(response, held).await
}

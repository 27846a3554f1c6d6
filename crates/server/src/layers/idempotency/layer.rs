//! Idempotency as a tower layer: a request without an `Idempotency-Key`
//! goes straight to its route, as if the layer were not there (no box, no
//! clone of the route), unless the response cache takes it; one with a key
//! takes the keyed path, boxed. Not
//! `axum::middleware::from_fn`, which boxes every request's future and the
//! route behind it (allocations and memory per call in flight: the
//! performance page).

use super::cache::{cached, caches};
use super::keyed::{HEADER, Keyed, keyed};
use axum::extract::Request;
use axum::response::Response;
use futures_util::future::{BoxFuture, Either};
use std::convert::Infallible;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// The layer of a keyed route.
#[derive(Debug, Clone)]
pub struct KeyedLayer(pub Keyed);

impl<S> Layer<S> for KeyedLayer {
    type Service = KeyedRoute<S>;

    fn layer(&self, route: S) -> KeyedRoute<S> {
        KeyedRoute {
            keyed: self.0.clone(),
            route,
        }
    }
}

/// A route whose requests may carry an `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct KeyedRoute<S> {
    keyed: Keyed,
    route: S,
}

impl<S> Service<Request> for KeyedRoute<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.route.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let cache = !request.headers().contains_key(HEADER) && caches(&self.keyed, &request);
        if !cache && !request.headers().contains_key(HEADER) {
            return Either::Left(self.route.call(request));
        }
        // The keyed path runs the route after awaits of its own: it takes
        // the route that is ready, and a clone stays for the next request.
        let fresh = self.route.clone();
        let route = std::mem::replace(&mut self.route, fresh);
        let keyed_state = self.keyed.clone();
        Either::Right(Box::pin(async move {
            Ok(match cache {
                true => cached(keyed_state, request, route).await,
                false => keyed(keyed_state, request, route).await,
            })
        }))
    }
}

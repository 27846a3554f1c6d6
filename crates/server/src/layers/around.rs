//! A layer that does something to each request before it goes on, and to
//! its response once that is ready, both at once (no await): the access
//! log, the token check and the drop-ins' error shapes are each an
//! [`Around`], and this is their one layer. Not axum's `from_fn` or
//! `map_response`: those box each request's future, and clone and box the
//! service behind it, per layer and per request (allocations and memory
//! per call in flight: the performance page).

use axum::extract::Request;
use axum::response::Response;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// What a layer does around each request.
pub trait Around: Clone {
    /// What it takes from the request to its response.
    type Carry;

    /// Before the request goes on: what to carry to its response, or the
    /// answer that stops it there.
    fn before(&self, request: &mut Request) -> Before<Self::Carry>;

    /// Once its response is ready (not for an answer `before` gave).
    fn after(carry: Self::Carry, response: Response) -> Response;
}

/// What [`Around::before`] makes of a request.
#[derive(Debug)]
pub enum Before<C> {
    /// It goes on, `C` carried to its response.
    Go(C),
    /// It stops here, with this answer.
    Stop(Response),
}

/// Two at once, `A` outside `B`, as `.layer(AroundLayer(b))` then
/// `.layer(AroundLayer(a))` would do them, in one layer: axum boxes every
/// route of a router again for each layer put on it, and clones each box
/// per request. An answer `B` stops a request with still goes through
/// `A`'s `after`, as it would come back out through `A`'s layer.
impl<A: Around, B: Around> Around for (A, B) {
    type Carry = (A::Carry, B::Carry);

    fn before(&self, request: &mut Request) -> Before<Self::Carry> {
        let outer = match self.0.before(request) {
            Before::Go(carry) => carry,
            Before::Stop(answer) => return Before::Stop(answer),
        };
        match self.1.before(request) {
            Before::Go(inner) => Before::Go((outer, inner)),
            Before::Stop(answer) => Before::Stop(A::after(outer, answer)),
        }
    }

    fn after((outer, inner): Self::Carry, response: Response) -> Response {
        A::after(outer, B::after(inner, response))
    }
}

/// The layer of an [`Around`].
#[derive(Debug, Clone)]
pub struct AroundLayer<A>(pub A);

impl<A: Around, S> Layer<S> for AroundLayer<A> {
    type Service = Wrapped<A, S>;

    fn layer(&self, inner: S) -> Wrapped<A, S> {
        Wrapped {
            around: self.0.clone(),
            inner,
        }
    }
}

/// `S`, with `A` around each of its requests.
#[derive(Debug, Clone)]
pub struct Wrapped<A, S> {
    around: A,
    inner: S,
}

impl<A, S> Service<Request> for Wrapped<A, S>
where
    A: Around,
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = WrappedFuture<A, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        match self.around.before(&mut request) {
            Before::Go(carry) => WrappedFuture::Going {
                inner: self.inner.call(request),
                carry: Some(carry),
            },
            Before::Stop(answer) => WrappedFuture::Stopped {
                answer: Some(answer),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's response, with `A`'s `after` done to it.
    #[project = Wrapping]
    pub enum WrappedFuture<A, F>
    where
        A: Around,
    {
        /// The request went on.
        Going { #[pin] inner: F, carry: Option<A::Carry> },
        /// `before` answered it.
        Stopped { answer: Option<Response> },
    }
}

impl<A, F, E> Future for WrappedFuture<A, F>
where
    A: Around,
    F: Future<Output = Result<Response, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.project() {
            Wrapping::Going { inner, carry } => {
                let result = std::task::ready!(inner.poll(cx));
                let carry = carry.take().expect("a response is ready once");
                Poll::Ready(result.map(|response| A::after(carry, response)))
            }
            Wrapping::Stopped { answer } => {
                Poll::Ready(Ok(answer.take().expect("an answer is given once")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use std::convert::Infallible;
    use tower::ServiceExt;

    /// Stops requests to `/stop`; marks the others' responses with the
    /// path it took from their request.
    #[derive(Clone)]
    struct Marks;

    impl Around for Marks {
        type Carry = String;

        fn before(&self, request: &mut Request) -> Before<String> {
            match request.uri().path() {
                "/stop" => {
                    Before::Stop(Response::builder().status(401).body(Body::empty()).unwrap())
                }
                path => Before::Go(path.to_owned()),
            }
        }

        fn after(path: String, mut response: Response) -> Response {
            response
                .headers_mut()
                .insert("x-path", path.parse().unwrap());
            response
        }
    }

    #[tokio::test]
    async fn before_may_stop_a_request_and_after_sees_its_response() {
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = reached.clone();
        let inner = tower::service_fn(move |_: Request| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async { Ok::<_, Infallible>(Response::new(Body::empty())) }
        });
        let service = AroundLayer(Marks).layer(inner);
        let request = |path: &str| Request::builder().uri(path).body(Body::empty()).unwrap();
        let Ok(answer) = service.clone().oneshot(request("/a/b")).await;
        assert_eq!(answer.headers()["x-path"], "/a/b");
        let Ok(stopped) = service.oneshot(request("/stop")).await;
        assert_eq!(stopped.status(), 401);
        assert!(
            stopped.headers().get("x-path").is_none(),
            "after is not done to it"
        );
        assert_eq!(reached.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    /// Goes on, marking the response with its name, outermost first.
    #[derive(Clone)]
    struct Names(&'static str);

    impl Around for Names {
        type Carry = &'static str;

        fn before(&self, request: &mut Request) -> Before<&'static str> {
            let mut seen = request
                .headers()
                .get("x-before")
                .map_or(String::new(), |v| format!("{},", v.to_str().unwrap()));
            seen.push_str(self.0);
            request
                .headers_mut()
                .insert("x-before", seen.parse().unwrap());
            Before::Go(self.0)
        }

        fn after(name: &'static str, mut response: Response) -> Response {
            response
                .headers_mut()
                .append("x-after", name.parse().unwrap());
            response
        }
    }

    #[tokio::test]
    async fn a_pair_does_what_its_two_layers_would_in_their_order() {
        let inner = tower::service_fn(|request: Request| async move {
            let before = request.headers()["x-before"].clone();
            let mut response = Response::new(Body::empty());
            response.headers_mut().insert("x-before", before);
            Ok::<_, Infallible>(response)
        });
        let request = |path: &str| Request::builder().uri(path).body(Body::empty()).unwrap();
        let paired = AroundLayer((Names("outer"), Names("inner"))).layer(inner);
        let two = AroundLayer(Names("outer")).layer(AroundLayer(Names("inner")).layer(inner));
        for service in [paired.clone().boxed_clone(), two.boxed_clone()] {
            let Ok(answer) = service.oneshot(request("/a")).await;
            assert_eq!(answer.headers()["x-before"], "outer,inner");
            let after: Vec<_> = answer.headers().get_all("x-after").iter().collect();
            assert_eq!(after, ["inner", "outer"]);
        }
        // The inner one stops it: the outer one's after still sees it.
        let stopping =
            AroundLayer((Names("outer"), Marks)).layer(tower::service_fn(|_: Request| async {
                Ok::<_, Infallible>(Response::new(Body::empty()))
            }));
        let Ok(stopped) = stopping.oneshot(request("/stop")).await;
        assert_eq!(stopped.status(), 401);
        assert_eq!(stopped.headers()["x-after"], "outer");
        // The outer one stops it: the inner one never sees it.
        let Ok(stopped) = AroundLayer((Marks, Names("inner")))
            .layer(paired)
            .oneshot(request("/stop"))
            .await;
        assert_eq!(stopped.status(), 401);
        assert!(stopped.headers().get("x-after").is_none());
    }
}

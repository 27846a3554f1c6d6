//! The floor of a gateway on this project's own stack: a reverse proxy on
//! hyper and tokio that forwards each request's bytes to `--upstream`
//! (`http://HOST:PORT`) over pooled keep-alive connections and streams the
//! answer back. No parsing, no engine, no logging: what no gateway built on
//! hyper/tokio can go under. Prints `listening on http://ADDR` once it
//! accepts. `--port` (0: any free one).

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

type Body = BoxBody<Bytes, hyper::Error>;

#[tokio::main]
async fn main() {
    let args = callai_bench::args();
    let upstream: Uri = callai_bench::arg(&args, "upstream", String::new())
        .parse()
        .expect("--upstream is http://HOST:PORT");
    let port: u16 = callai_bench::arg(&args, "port", 0);
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(connector);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    eprintln!("listening on http://{}", listener.local_addr().unwrap());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                forward(client.clone(), upstream.clone(), request)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Sends `request` on to `upstream` with its path, headers and body as
/// they came; the answer, or 502 when the upstream cannot be reached.
async fn forward(
    client: Client<HttpConnector, Incoming>,
    upstream: Uri,
    request: Request<Incoming>,
) -> Result<Response<Body>, hyper::Error> {
    let (mut head, body) = request.into_parts();
    let mut target = upstream.into_parts();
    target.path_and_query = head.uri.path_and_query().cloned();
    head.uri = Uri::from_parts(target).expect("an upstream URI and a request path");
    head.headers.remove(hyper::header::HOST);
    match client.request(Request::from_parts(head, body)).await {
        Ok(answer) => Ok(answer.map(BodyExt::boxed)),
        Err(e) => {
            let mut answer = Response::new(
                Full::new(Bytes::from(format!("upstream: {e}")))
                    .map_err(|never| match never {})
                    .boxed(),
            );
            *answer.status_mut() = StatusCode::BAD_GATEWAY;
            Ok(answer)
        }
    }
}

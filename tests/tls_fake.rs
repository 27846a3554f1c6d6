//! A fake OpenAI-compatible provider over TLS on loopback that speaks
//! HTTP/2 (and HTTP/1.1, by ALPN) with a stream limit per connection,
//! answering each request after a delay; it counts the connections it
//! accepted, the requests it took, the most streams in flight on one
//! connection, and can say `GOAWAY` on every connection or cut them all.
//! Its certificates come from [`Pki`] (made with `rcgen`): a CA and a leaf
//! for `127.0.0.1`; it may require a client certificate of that CA. Also a
//! CONNECT proxy on loopback that counts its tunnels.

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A test CA and what it signs, as PEM.
#[derive(Debug)]
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
#[derive(Debug)]
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Pki {
    /// A fresh CA.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { ca }
    }

    /// The CA's certificate.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A server certificate for `127.0.0.1` and `localhost`.
    pub fn server(&self) -> Leaf {
        self.leaf(ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate.
    pub fn client(&self) -> Leaf {
        self.leaf(ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn leaf(&self, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "callai test");
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes the CA's certificate into `dir` as `name`; its path.
    pub fn write_ca(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.ca_pem()).unwrap();
        path
    }
}

/// How the fake behaves.
#[derive(Debug)]
pub struct Options {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` on each connection.
    pub max_streams: u32,
    /// How long each answer takes.
    pub delay: Duration,
    /// The CA whose client certificates are required, if any.
    pub client_ca: Option<String>,
}

/// What the fake saw, shared with its tasks.
#[derive(Debug, Default)]
pub struct Seen {
    pub connections: AtomicUsize,
    pub requests: AtomicUsize,
    pub answered: AtomicUsize,
    /// The most streams in flight on one connection at once.
    pub most_streams: AtomicUsize,
}

/// The running fake.
#[derive(Debug)]
pub struct TlsFake {
    pub port: u16,
    pub seen: Arc<Seen>,
    /// 0: serve; 1: `GOAWAY` on every connection; 2: cut them all.
    signal: watch::Sender<u8>,
}

impl TlsFake {
    /// Starts it with `server`'s certificate.
    pub async fn start(server: &Leaf, options: Options) -> Self {
        let config = Arc::new(server_config(server, options.client_ca.as_deref()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Seen::default());
        let (signal, watching) = watch::channel(0u8);
        let (s, max, delay) = (seen.clone(), options.max_streams, options.delay);
        tokio::spawn(async move {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen, watching) = (acceptor.clone(), s.clone(), watching.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    seen.connections.fetch_add(1, Ordering::SeqCst);
                    serve(TokioIo::new(tls), seen, max, delay, watching).await;
                });
            }
        });
        Self { port, seen, signal }
    }

    /// The base URL of its OpenAI-compatible API.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/v1", self.port)
    }

    /// Every connection says `GOAWAY` and ends once its streams are done.
    pub fn go_away(&self) {
        let _ = self.signal.send(1);
    }

    /// Every connection is cut at once, its streams unanswered.
    pub fn cut(&self) {
        let _ = self.signal.send(2);
    }

    /// Back to serving new connections as usual.
    pub fn resume(&self) {
        let _ = self.signal.send(0);
    }

    /// A number it counted.
    pub fn count(&self, which: fn(&Seen) -> &AtomicUsize) -> usize {
        which(&self.seen).load(Ordering::SeqCst)
    }
}

fn server_config(server: &Leaf, client_ca: Option<&str>) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = vec![CertificateDer::from_pem_slice(server.cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
                .unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// Serves one HTTP/2 connection until it ends or the signal says
/// otherwise.
async fn serve<T>(
    io: TokioIo<T>,
    seen: Arc<Seen>,
    max: u32,
    delay: Duration,
    mut signal: watch::Receiver<u8>,
) where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // Only what is said from now on concerns this connection.
    signal.borrow_and_update();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let service = service_fn(move |_request| {
        let (seen, in_flight) = (seen.clone(), in_flight.clone());
        async move {
            seen.requests.fetch_add(1, Ordering::SeqCst);
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most_streams.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            seen.answered.fetch_add(1, Ordering::SeqCst);
            let body = crate::fake_server::short_completion().to_string();
            let response = hyper::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let conn = http2::Builder::new(TokioExecutor::new())
        .max_concurrent_streams(max)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut going_away = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            changed = signal.changed(), if !going_away => {
                if changed.is_err() {
                    going_away = true;
                    continue;
                }
                match *signal.borrow() {
                    1 => {
                        going_away = true;
                        conn.as_mut().graceful_shutdown();
                    }
                    2 => return,
                    _ => {}
                }
            }
        }
    }
}

/// A CONNECT proxy on loopback: each tunnel it opened is counted; with
/// `auth`, a request without that `Proxy-Authorization` is refused 407.
#[derive(Debug)]
pub struct ConnectProxy {
    pub port: u16,
    pub tunnels: Arc<AtomicUsize>,
}

impl ConnectProxy {
    /// A proxy spoken to in plain HTTP.
    pub async fn start(auth: Option<String>) -> Self {
        Self::start_with(auth, None).await
    }

    /// A proxy spoken to over TLS with `tls`'s certificate when given.
    pub async fn start_with(auth: Option<String>, tls: Option<&Leaf>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let counted = tunnels.clone();
        let acceptor =
            tls.map(|leaf| tokio_rustls::TlsAcceptor::from(Arc::new(server_config(leaf, None))));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (counted, auth) = (counted.clone(), auth.clone());
                match acceptor.clone() {
                    Some(acceptor) => {
                        tokio::spawn(async move {
                            if let Ok(client) = acceptor.accept(client).await {
                                tunnel(client, counted, auth).await;
                            }
                        });
                    }
                    None => {
                        tokio::spawn(tunnel(client, counted, auth));
                    }
                }
            }
        });
        Self { port, tunnels }
    }
}

async fn tunnel<S>(mut client: S, counted: Arc<AtomicUsize>, auth: Option<String>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if client.read_exact(&mut byte).await.is_err() {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let target = head
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let authorized = auth.is_none_or(|a| {
        head.lines().any(|l| {
            l.to_ascii_lowercase() == format!("proxy-authorization: {}", a.to_ascii_lowercase())
        })
    });
    if !authorized {
        let _ = client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
            .await;
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(&target).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    counted.fetch_add(1, Ordering::SeqCst);
    let _ = client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await;
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

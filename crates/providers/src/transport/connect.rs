//! Opening one connection to a provider: TCP (hyper-util's connector:
//! DNS, happy eyeballs, no Nagle), through a CONNECT proxy when one is set
//! or the environment names one (hyper-util's `Tunnel` and proxy matcher),
//! then TLS (tokio-rustls) with the HTTP version ALPN settled.

use super::settings::{Http2, TransportSettings};
use super::{chain, tls};
use callai_engine::config::{ConfigError, invalid};
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;
use tower_service::Service;

/// A byte stream to a provider: TCP, TLS, a tunnel, or TLS in a tunnel.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin> Stream for T {}

/// An open connection, ready for HTTP.
pub(crate) type Io = TokioIo<Box<dyn Stream>>;

/// A connection opened: its stream and whether it speaks HTTP/2.
pub(crate) struct Opened {
    pub io: Io,
    pub h2: bool,
}

/// Why a connection did not open, said for a person (a TLS failure says
/// which).
#[derive(Debug, Clone)]
pub(crate) struct ConnectFailed(pub String);

/// Opens connections to one provider.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector,
    tls: TlsConnector,
    /// TLS to an `https://` proxy (ALPN HTTP/1.1: CONNECT is HTTP/1.1).
    proxy_tls: TlsConnector,
    proxies: Arc<Matcher>,
    http2: Http2,
    timeout: Duration,
}

impl Connector {
    /// The connector of provider `name`: its TLS and proxy settings read
    /// (a file that does not read names its key), connections that take
    /// no longer than `timeout` to open.
    pub(crate) fn new(
        name: &str,
        s: &TransportSettings,
        env: &dyn Fn(&str) -> Option<String>,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        let config = tls::client_config(name, s)?;
        let mut to_proxy = ClientConfig::clone(&config);
        to_proxy.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(timeout));
        Ok(Self {
            tcp,
            tls: TlsConnector::from(config),
            proxy_tls: TlsConnector::from(Arc::new(to_proxy)),
            proxies: Arc::new(proxies(name, s, env)?),
            http2: s.http2,
            timeout,
        })
    }

    /// Opens a connection to `target`'s host and port.
    pub(crate) async fn open(&self, target: &Uri) -> Result<Opened, ConnectFailed> {
        match tokio::time::timeout(self.timeout, self.open_within(target)).await {
            Ok(opened) => opened,
            Err(_) => Err(ConnectFailed(format!(
                "no connection within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    async fn open_within(&self, target: &Uri) -> Result<Opened, ConnectFailed> {
        let host = target
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let https = target.scheme_str() == Some("https");
        let port = target.port_u16().unwrap_or(if https { 443 } else { 80 });
        let dst: Uri = format!("{}://{}:{port}", if https { "https" } else { "http" }, {
            if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            }
        })
        .parse()
        .map_err(|e| ConnectFailed(format!("the provider's address is not one: {e}")))?;
        let stream: Box<dyn Stream> = match self.proxies.intercept(&dst) {
            Some(proxy) => {
                let to_proxy = ToProxy {
                    tcp: self.tcp.clone(),
                    tls: self.proxy_tls.clone(),
                };
                let mut tunnel = Tunnel::new(proxy.uri().clone(), to_proxy);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let io = tunnel
                    .call(dst)
                    .await
                    .map_err(|e| ConnectFailed(format!("through the proxy: {}", chain(&e))))?;
                io.into_inner()
            }
            None => {
                let mut tcp = self.tcp.clone();
                let io = tcp.call(dst).await.map_err(|e| ConnectFailed(chain(&e)))?;
                Box::new(io.into_inner())
            }
        };
        if !https {
            let h2 = self.http2 == Http2::Always;
            return Ok(Opened {
                io: TokioIo::new(stream),
                h2,
            });
        }
        let stream = handshake(&self.tls, &host, stream).await?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok(Opened {
            io: TokioIo::new(Box::new(stream)),
            h2,
        })
    }
}

/// TLS over `stream` to `host`.
async fn handshake(
    tls: &TlsConnector,
    host: &str,
    stream: Box<dyn Stream>,
) -> Result<tokio_rustls::client::TlsStream<Box<dyn Stream>>, ConnectFailed> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| ConnectFailed(format!("{host:?} is not a name TLS can check: {e}")))?;
    tls.connect(name, stream)
        .await
        .map_err(|e| ConnectFailed(tls::describe(&e).unwrap_or_else(|| format!("TLS: {e}"))))
}

/// The proxies a provider's requests go through: its `proxy` (with the
/// credentials of `proxyAuthEnv`) but for hosts `NO_PROXY` names, or the
/// environment's `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY`.
fn proxies(
    name: &str,
    s: &TransportSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Matcher, ConfigError> {
    let Some(proxy) = &s.proxy else {
        return Ok(Matcher::from_env());
    };
    let mut url = url::Url::parse(proxy)
        .map_err(|e| invalid(&format!("providers.{name}.proxy"), e.to_string()))?;
    if let Some(var) = &s.proxy_auth_env {
        let key = format!("providers.{name}.proxyAuthEnv");
        let credentials = env(var)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(&key, format!("the variable {var} is not set")))?;
        let (user, password) = credentials
            .split_once(':')
            .ok_or_else(|| invalid(&key, format!("the variable {var} must hold user:password")))?;
        let refused = |_| invalid(&key, "the proxy URL cannot carry credentials".into());
        url.set_username(user).map_err(refused)?;
        url.set_password(Some(password)).map_err(refused)?;
    }
    let no_proxy = env("NO_PROXY").or_else(|| env("no_proxy"));
    let mut builder = Matcher::builder().all(url.to_string());
    if let Some(no) = no_proxy {
        builder = builder.no(no);
    }
    Ok(builder.build())
}

/// Connects to a proxy: TCP, then TLS for an `https://` one.
#[derive(Clone)]
struct ToProxy {
    tcp: HttpConnector,
    tls: TlsConnector,
}

type Connecting = Pin<Box<dyn Future<Output = Result<Io, ConnectFailed>> + Send>>;

impl Service<Uri> for ToProxy {
    type Response = Io;
    type Error = ConnectFailed;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectFailed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, proxy: Uri) -> Connecting {
        let mut tcp = self.tcp.clone();
        let tls = self.tls.clone();
        Box::pin(async move {
            let https = proxy.scheme_str() == Some("https");
            let host = proxy.host().unwrap_or_default().to_owned();
            let io = tcp
                .call(proxy)
                .await
                .map_err(|e| ConnectFailed(format!("to the proxy: {}", chain(&e))))?;
            let stream: Box<dyn Stream> = Box::new(io.into_inner());
            if !https {
                return Ok(TokioIo::new(stream));
            }
            let stream = handshake(&tls, &host, stream)
                .await
                .map_err(|e| ConnectFailed(format!("to the proxy: {}", e.0)))?;
            Ok(TokioIo::new(Box::new(stream) as Box<dyn Stream>))
        })
    }
}

impl std::fmt::Display for ConnectFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectFailed {}

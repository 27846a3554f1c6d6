//! The fake provider over TLS, for the benchmark's TLS column: a CA and a
//! leaf for `127.0.0.1` made with `rcgen` at start (the CA written where
//! the contenders read it), and each connection served by hyper-util's
//! server, HTTP/2 or HTTP/1.1 by ALPN, as a real provider's endpoint is.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The streams a connection takes at once: what OpenAI's and Anthropic's
/// endpoints advertise.
const MAX_STREAMS: u32 = 100;

/// A server config for a fresh leaf of a fresh CA, whose certificate is
/// written to `ca_file`.
fn config(ca_file: &Path) -> rustls::ServerConfig {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "callai bench CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca =
        CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("the CA");
    std::fs::write(ca_file, ca.pem()).expect("the CA file writes");
    let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    let mut params = CertificateParams::new(names).expect("leaf params");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("a key");
    let leaf = params.signed_by(&key, &ca).expect("the leaf");
    let chain = vec![CertificateDer::from_pem_slice(leaf.pem().as_bytes()).expect("PEM")];
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("PEM");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the leaf and its key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// The acceptor of TLS connections for a fresh certificate, the CA's
/// written to `ca_file`.
pub fn acceptor(ca_file: &Path) -> TlsAcceptor {
    TlsAcceptor::from(Arc::new(config(ca_file)))
}

/// Serves `app` over TLS on `listener` until the process ends.
pub async fn serve(listener: TcpListener, app: Router, acceptor: TlsAcceptor) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut server = auto::Builder::new(TokioExecutor::new());
            server.http2().max_concurrent_streams(MAX_STREAMS);
            let service = TowerToHyperService::new(app);
            let _ = server.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

//! TLS to one provider: the system's roots (through
//! `rustls-platform-verifier`, as reqwest had it) plus the provider's own
//! `caFile`, this host's certificate when the provider asks for one, ALPN
//! as `http2` says; and what a failed handshake was, said for a person.

use super::settings::{Http2, TransportSettings};
use callai_engine::config::{ConfigError, invalid};
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The TLS settings of one provider's connections.
pub(crate) fn client_config(
    name: &str,
    s: &TransportSettings,
) -> Result<Arc<ClientConfig>, ConfigError> {
    let key = |k: &str| format!("providers.{name}.{k}");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = match &s.ca_file {
        Some(path) => {
            let roots = certificates(&key("caFile"), path)?;
            rustls_platform_verifier::Verifier::new_with_extra_roots(roots, provider.clone())
        }
        None => rustls_platform_verifier::Verifier::new(provider.clone()),
    }
    .map_err(|e| {
        invalid(
            &key("caFile"),
            format!("cannot load the trusted roots: {e}"),
        )
    })?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&format!("providers.{name}"), e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut config = match (&s.client_cert, &s.client_key) {
        (Some(cert), Some(private)) => {
            let chain = certificates(&key("clientCert"), cert)?;
            let private = PrivateKeyDer::from_pem_file(private).map_err(|e| {
                invalid(
                    &key("clientKey"),
                    format!("{} holds no readable private key: {e}", private.display()),
                )
            })?;
            builder
                .with_client_auth_cert(chain, private)
                .map_err(|e| invalid(&key("clientKey"), format!("does not fit clientCert: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = match s.http2 {
        Http2::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Http2::Always => vec![b"h2".to_vec()],
        Http2::Never => vec![b"http/1.1".to_vec()],
    };
    Ok(Arc::new(config))
}

/// The PEM certificates of `path`: an error naming `key` when it does not
/// read or holds none.
fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(key, format!("cannot read {shown}: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(key, format!("{shown} is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(
            key,
            format!("{shown} holds no certificate (a PEM \"BEGIN CERTIFICATE\" block)"),
        ));
    }
    Ok(certs)
}

/// What a TLS failure was, when `error` (or what it wraps) is one: an
/// issuer this host does not trust, a certificate for another name, an
/// expired one, a client certificate the server wanted or refused.
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
    let mut source = Some(error);
    let tls = loop {
        let Some(e) = source else {
            return alert_in_text(error);
        };
        if let Some(tls) = e.downcast_ref::<Error>() {
            break tls;
        }
        // An I/O error's `source` skips the error it wraps, and so does
        // an HTTP/2 error's that holds one.
        let io = e
            .downcast_ref::<std::io::Error>()
            .or_else(|| e.downcast_ref::<h2::Error>().and_then(h2::Error::get_io));
        let wrapped = io.and_then(|io| io.get_ref());
        if let Some(tls) = wrapped.and_then(|w| w.downcast_ref::<Error>()) {
            break tls;
        }
        source = e.source();
    };
    Some(match tls {
        Error::InvalidCertificate(cert) => match cert {
            Cert::UnknownIssuer => "TLS: the provider's certificate is from an unknown issuer \
                 (not a CA this host trusts; a private CA goes in caFile)"
                .to_owned(),
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } => {
                "TLS: the provider's certificate is not valid for its name (name mismatch)"
                    .to_owned()
            }
            Cert::Expired | Cert::ExpiredContext { .. } => {
                "TLS: the provider's certificate has expired".to_owned()
            }
            Cert::NotValidYet | Cert::NotValidYetContext { .. } => {
                "TLS: the provider's certificate is not valid yet".to_owned()
            }
            Cert::Revoked => "TLS: the provider's certificate is revoked".to_owned(),
            other => format!("TLS: the provider's certificate was refused ({other:?})"),
        },
        Error::AlertReceived(Alert::CertificateRequired | Alert::HandshakeFailure) => {
            "TLS: the provider ended the handshake; it may require a client certificate \
             (clientCert and clientKey)"
                .to_owned()
        }
        Error::AlertReceived(
            Alert::BadCertificate | Alert::UnknownCA | Alert::CertificateUnknown,
        ) => "TLS: the provider refused this host's client certificate".to_owned(),
        other => format!("TLS: {other}"),
    })
}

/// An alert the server sent after the handshake, once HTTP/2 has read it:
/// h2 keeps an I/O error's kind and text only (its errors are cloned), so
/// rustls' own error is gone and its text is all there is to read.
fn alert_in_text(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(e) = source {
        let text = e.to_string();
        if let Some(alert) = text.split("received fatal alert: ").nth(1) {
            let alert = alert.split_whitespace().next().unwrap_or_default();
            return Some(match alert {
                "CertificateRequired" | "HandshakeFailure" => {
                    "TLS: the provider requires a client certificate (clientCert and clientKey)"
                        .to_owned()
                }
                "BadCertificate" | "UnknownCA" | "CertificateUnknown" => {
                    "TLS: the provider refused this host's client certificate".to_owned()
                }
                other => format!("TLS: the provider ended the connection ({other})"),
            });
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_does_not_read_or_holds_nothing_is_named() {
        let dir = std::env::temp_dir().join(format!("callai-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        for (file, says) in [
            (dir.join("absent.pem"), "cannot read"),
            (empty, "holds no certificate"),
        ] {
            let s = TransportSettings {
                ca_file: Some(file),
                ..TransportSettings::default()
            };
            let e = client_config("p", &s).unwrap_err().to_string();
            assert!(e.contains("providers.p.caFile") && e.contains(says), "{e}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn tls_failures_are_said_for_a_person() {
        let wrapped = std::io::Error::other(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert!(describe(&wrapped).unwrap().contains("unknown issuer"));
        let expired = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        assert!(describe(&expired).unwrap().contains("expired"));
        assert_eq!(describe(&std::io::Error::other("refused")), None);
        let cloned = std::io::Error::other("received fatal alert: CertificateRequired");
        assert!(
            describe(&cloned)
                .unwrap()
                .contains("requires a client certificate")
        );
    }
}

//! What a server without any token (the laptop setup: whoever reaches it is
//! the admin) refuses of a browser, so that a web page cannot use it:
//!
//! - a `Host` that is not this server's (DNS rebinding: a page whose name
//!   resolves to loopback reads the answers as its own origin's). An IP
//!   literal, `localhost` and the names `[server] allowedHosts` lists are
//!   this server's; a rebinding page cannot send an IP literal of its own.
//! - a cross-origin request: an `Origin` that is not the `Host` the
//!   request went to (or `null`), or `Sec-Fetch-Site: cross-site`.
//! - a `POST` body not sent as `application/json`: a page of any origin
//!   may send `text/plain`, a form or a typeless blob without asking
//!   first, never `application/json`.
//!
//! A server with tokens keeps to them: a page has no token to send.

use crate::error::{ApiCode, ApiError};
use axum::extract::Request;
use axum::http::{Method, header};
use std::sync::Arc;

/// The checks, with the names `[server] allowedHosts` lists.
#[derive(Debug, Clone, Default)]
pub struct BrowserGuard {
    allowed_hosts: Arc<[String]>,
}

/// The host part of an authority (`name:port`, `[v6]:port`, `name`),
/// lowercased, and its port when it names one.
fn split_authority(authority: &str) -> (String, Option<&str>) {
    let (host, port) = match authority.rsplit_once(':') {
        // `[::1]` alone has colons inside its brackets and no port.
        Some((host, port))
            if !port.contains(']') && (!host.contains(':') || host.ends_with(']')) =>
        {
            (host, Some(port))
        }
        _ => (authority, None),
    };
    (host.to_ascii_lowercase(), port)
}

/// Whether `host` (no port) is an IP literal: `127.0.0.1`, `[::1]`.
fn is_ip_literal(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    bare.unwrap_or(host).parse::<std::net::IpAddr>().is_ok()
}

impl BrowserGuard {
    /// The guard of a server whose `[server] allowedHosts` is `names`.
    pub fn new(names: &[String]) -> Self {
        Self {
            allowed_hosts: names.iter().map(|n| n.to_ascii_lowercase()).collect(),
        }
    }

    /// Why `request` is refused, if it is.
    pub fn refusal(&self, request: &Request) -> Option<ApiError> {
        let headers = request.headers();
        let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
        let host = text(header::HOST);
        if let Some(host) = host {
            let (name, _) = split_authority(host);
            let ours =
                is_ip_literal(&name) || name == "localhost" || self.allowed_hosts.contains(&name);
            if !ours {
                return Some(forbidden(
                    "Host",
                    format!(
                        "Host {host:?} is not this server's: a server without tokens answers \
                         requests to its own address only (list the name in [server] allowedHosts)"
                    ),
                ));
            }
        }
        let cross_site =
            text(header::HeaderName::from_static("sec-fetch-site")) == Some("cross-site");
        let origin = text(header::ORIGIN);
        let foreign = origin.is_some_and(|o| {
            let authority = o
                .strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"));
            match (authority, host) {
                (Some(authority), Some(host)) => {
                    split_authority(authority) != split_authority(host)
                }
                _ => true,
            }
        });
        if cross_site || foreign {
            let from = origin.map_or_else(|| "another site".to_owned(), |o| format!("{o:?}"));
            return Some(forbidden(
                "Origin",
                format!(
                    "a request from {from}: a server without tokens answers no browser page of \
                     another origin (set [server] tokenEnv to share it)"
                ),
            ));
        }
        if request.method() == Method::POST {
            let json = text(header::CONTENT_TYPE).is_some_and(|t| {
                let essence = t.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case("application/json")
            });
            if !json {
                let sent = text(header::CONTENT_TYPE).unwrap_or("none");
                let e = ApiError::new(
                    ApiCode::UnsupportedMediaType,
                    format!(
                        "Content-Type: {sent:?} is not application/json: a server without tokens \
                         takes a body only as application/json (which no page of another site \
                         can send without asking first)"
                    ),
                );
                return Some(e.with_detail("field", "Content-Type"));
            }
        }
        None
    }
}

fn forbidden(field: &str, message: String) -> ApiError {
    ApiError::new(ApiCode::Forbidden, message).with_detail("field", field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(method: &str, headers: &[(&str, &str)]) -> Request {
        let mut r = Request::builder().method(method).uri("/v1/call");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.body(Body::empty()).unwrap()
    }

    fn refused(
        guard: &BrowserGuard,
        method: &str,
        headers: &[(&str, &str)],
    ) -> Option<(u16, String)> {
        guard.refusal(&request(method, headers)).map(|e| {
            let field = e.details.as_ref().unwrap()["field"]
                .as_str()
                .unwrap()
                .to_owned();
            (e.status().as_u16(), field)
        })
    }

    #[test]
    fn only_this_servers_names_and_origin_and_json_bodies_pass() {
        let guard = BrowserGuard::new(&["Callai.Internal".into()]);
        let json = ("content-type", "application/json; charset=utf-8");
        for host in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:8080",
            "callai.internal",
            "127.0.0.7",
        ] {
            assert_eq!(
                refused(&guard, "POST", &[("host", host), json]),
                None,
                "{host}"
            );
        }
        assert_eq!(refused(&guard, "GET", &[]), None, "no Host: no browser");
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "callai.internal.evil",
        ] {
            assert_eq!(
                refused(&guard, "GET", &[("host", host)]),
                Some((403, "Host".into())),
                "{host}"
            );
        }
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(
            refused(&guard, "GET", &[host, ("origin", "http://127.0.0.1:8080")]),
            None
        );
        for origin in ["http://127.0.0.1:3000", "http://evil.example", "null"] {
            assert_eq!(
                refused(&guard, "GET", &[host, ("origin", origin)]),
                Some((403, "Origin".into())),
                "{origin}"
            );
        }
        assert_eq!(
            refused(&guard, "GET", &[host, ("sec-fetch-site", "cross-site")]),
            Some((403, "Origin".into()))
        );
        assert_eq!(
            refused(&guard, "GET", &[host, ("sec-fetch-site", "same-origin")]),
            None
        );
        for sent in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            None,
        ] {
            let mut headers = vec![host];
            headers.extend(sent.map(|t| ("content-type", t)));
            assert_eq!(
                refused(&guard, "POST", &headers),
                Some((415, "Content-Type".into())),
                "{sent:?}"
            );
        }
        assert_eq!(
            refused(&guard, "PUT", &[host]),
            None,
            "a PUT is asked for first"
        );
    }
}

//! A service account's key file, and the OAuth 2.0 JWT bearer grant
//! (RFC 7523) that turns it into an access token: a JWT signed with the
//! account's RSA key (RS256, by `ring`) posted to the file's `token_uri`.
//! No crate does this grant without bringing its own HTTP client, and the
//! request must go over the provider's transport (its `caFile`, its
//! proxy), so it is written here; the signature is ring's.

use crate::http::{Read, read_capped};
use crate::transport::{SendFailed, Transport};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use callai_engine::{FailureKind, ProviderFailure};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The scope a token is asked for: Vertex AI's.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's token endpoint, when the key file names none.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// How long an assertion is valid (Google's most).
const ASSERTION_LIFE: u64 = 3600;
/// The most of a key file or a token answer read.
const MAX_READ: usize = 64 << 10;

/// The fields of a key file the grant needs.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

/// A service account, its key parsed.
pub(super) struct Account {
    email: String,
    key_id: Option<String>,
    key: RsaKeyPair,
    token_uri: url::Url,
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct Granted {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// A token endpoint's refusal.
#[derive(Deserialize)]
struct Refused {
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

impl Account {
    /// Reads the key file at `path`; why not, naming what is wrong (never
    /// showing the key).
    pub(super) fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
        if text.len() > MAX_READ {
            return Err("is over 64 KiB; a key file is a few".into());
        }
        let file: KeyFile = serde_json::from_slice(&text)
            .map_err(|e| format!("is not a service account's JSON key file: {e}"))?;
        if file.kind != "service_account" {
            return Err(format!(
                "is of type {:?}, not a service account's key (\"service_account\"); for \
                 other credentials use tokenCommand",
                file.kind
            ));
        }
        if file.client_email.is_empty() {
            return Err("has no client_email".into());
        }
        let der = PrivatePkcs8KeyDer::from_pem_slice(file.private_key.as_bytes())
            .map_err(|_| "its private_key is not a PEM PKCS#8 key".to_owned())?;
        let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| format!("its private_key is not an RSA key ring can use: {e}"))?;
        let uri = file.token_uri.as_deref().unwrap_or(GOOGLE_TOKEN_URI);
        let token_uri = url::Url::parse(uri)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| format!("its token_uri {uri:?} is not an http(s) URL"))?;
        Ok(Self {
            email: file.client_email,
            key_id: file.private_key_id,
            key,
            token_uri,
        })
    }

    /// Where its tokens are made.
    pub(super) fn token_uri(&self) -> &url::Url {
        &self.token_uri
    }

    /// The signed JWT asking for a token, issued at `now` (seconds since
    /// the epoch).
    fn assertion(&self, now: u64) -> String {
        let mut header = json!({"alg": "RS256", "typ": "JWT"});
        if let Some(id) = &self.key_id {
            header["kid"] = id.as_str().into();
        }
        let claims = json!({
            "iss": self.email, "scope": SCOPE, "aud": self.token_uri.as_str(),
            "iat": now, "exp": now + ASSERTION_LIFE,
        });
        let mut jwt = URL_SAFE_NO_PAD.encode(header.to_string());
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(claims.to_string()));
        let mut signature = vec![0; self.key.public().modulus_len()];
        let rng = ring::rand::SystemRandom::new();
        self.key
            .sign(&RSA_PKCS1_SHA256, &rng, jwt.as_bytes(), &mut signature)
            .expect("an RSA key that parsed signs");
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(signature));
        jwt
    }

    /// A new access token and how long it lives, from the token endpoint
    /// over `transport`.
    pub(super) async fn token(
        &self,
        transport: &Transport,
    ) -> Result<(String, Duration), ProviderFailure> {
        let fail = |kind, why: String| {
            ProviderFailure::new(kind, None, format!("Vertex AI token endpoint: {why}"))
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
            .append_pair("assertion", &self.assertion(now))
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let response = transport
            .post(&self.token_uri, &headers, form.into())
            .await
            .map_err(|e| match e {
                SendFailed::Unreached(why) => fail(FailureKind::Unreached, why),
                SendFailed::TimedOut => fail(FailureKind::Unreached, "timed out".into()),
                SendFailed::Failed(why) => fail(FailureKind::Unreached, why),
            })?;
        let status = response.status().as_u16();
        let body = match read_capped(response, MAX_READ as u64, false).await {
            Ok(body) => body,
            Err(Read::Over) => {
                let why = "its answer is over 64 KiB".into();
                return Err(fail(FailureKind::Unreached, why));
            }
            Err(Read::Failed(e)) => {
                let why = format!("its answer was cut short: {e}");
                return Err(fail(FailureKind::Unreached, why));
            }
        };
        if (200..300).contains(&status) {
            let granted: Granted = serde_json::from_slice(&body).map_err(|_| {
                let why = format!("its {status} answer holds no access_token");
                fail(FailureKind::Unreached, why)
            })?;
            let life = Duration::from_secs(granted.expires_in.unwrap_or(ASSERTION_LIFE));
            return Ok((granted.access_token, life));
        }
        let said = serde_json::from_slice::<Refused>(&body)
            .map(|r| format!("{}: {}", r.error, r.error_description))
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        let why = format!("HTTP {status}: {}", super::said(&said));
        // A busy or failing endpoint may answer the next time; a refusal
        // of the account will not.
        let kind = if matches!(status, 408 | 429) || status >= 500 {
            FailureKind::Unreached
        } else {
            FailureKind::Unanswerable
        };
        Err(fail(kind, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, body: serde_json::Value) -> std::path::PathBuf {
        let path = dir.join("sa.json");
        std::fs::write(&path, body.to_string()).unwrap();
        path
    }

    #[test]
    fn a_key_file_that_is_not_a_service_accounts_is_refused_saying_why() {
        let dir = std::env::temp_dir().join(format!("callai-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (json!({"type": "authorized_user"}), "tokenCommand"),
            (json!({"type": "service_account"}), "client_email"),
            (
                json!({"type": "service_account", "client_email": "a@b",
                       "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}),
                "not an RSA key",
            ),
            (
                json!({"type": "service_account", "client_email": "a@b", "private_key": "x"}),
                "not a PEM PKCS#8 key",
            ),
        ];
        for (body, says) in cases {
            let why = Account::read(&write(&dir, body)).err().unwrap();
            assert!(why.contains(says), "{why}");
        }
        std::fs::write(dir.join("sa.json"), "{").unwrap();
        let why = Account::read(&dir.join("sa.json")).err().unwrap();
        assert!(why.contains("JSON key file"), "{why}");
        let why = Account::read(&dir.join("absent.json")).err().unwrap();
        assert!(why.contains("cannot read"), "{why}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

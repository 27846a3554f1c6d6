//! A fake of Vertex AI and of Google's token endpoint on one loopback
//! port: `/token` makes an access token only for a JWT bearer grant whose
//! assertion is signed by the service account's key (checked with the
//! public half, which the key's maker gave it); `…:generateContent` and
//! `…:streamGenerateContent` answer only a bearer token it made. The RSA
//! key is made by Python's `cryptography` (the clients' venv), not by the
//! code under test.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A throwaway RSA key: its PKCS#8 PEM, and its public half as PKCS#1 DER.
#[derive(Debug, Clone)]
pub struct RsaKey {
    /// The private key, PEM.
    pub pem: String,
    /// The public key, DER.
    pub public: Vec<u8>,
}

impl RsaKey {
    /// A new 2048-bit key, made by `python` with `cryptography`.
    pub fn make(python: &Path) -> Self {
        let script = "import json, base64\n\
from cryptography.hazmat.primitives.asymmetric import rsa\n\
from cryptography.hazmat.primitives import serialization as s\n\
k = rsa.generate_private_key(public_exponent=65537, key_size=2048)\n\
pem = k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()).decode()\n\
pub = k.public_key().public_bytes(s.Encoding.DER, s.PublicFormat.PKCS1)\n\
print(json.dumps({'pem': pem, 'public': base64.b64encode(pub).decode()}))\n";
        let out = std::process::Command::new(python)
            .arg("-c")
            .arg(script)
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let made: Value = serde_json::from_slice(&out.stdout).expect("the key as JSON");
        Self {
            pem: made["pem"].as_str().unwrap().to_owned(),
            public: STANDARD.decode(made["public"].as_str().unwrap()).unwrap(),
        }
    }

    /// A service account's key file for this key in `dir`, its token
    /// endpoint `token_uri`.
    pub fn key_file(&self, dir: &Path, token_uri: &str) -> PathBuf {
        let path = dir.join("service-account.json");
        let file = json!({
            "type": "service_account", "project_id": "proj-1",
            "private_key_id": "key-1", "private_key": self.pem,
            "client_email": "callai@proj-1.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": token_uri,
        });
        std::fs::write(&path, file.to_string()).unwrap();
        path
    }
}

/// What the fake saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// The claims of each grant it accepted, in order.
    pub grants: Vec<Value>,
    /// Why each grant it refused was refused.
    pub refused: Vec<String>,
    /// Each model request: its path and query, and its `authorization`.
    pub requests: Vec<(String, String)>,
}

struct Fake {
    public: Vec<u8>,
    /// The `expires_in` of the tokens it makes.
    life: u64,
    /// The tokens it made, and any the test made it take.
    tokens: Mutex<Vec<String>>,
    seen: Mutex<Seen>,
    url: String,
}

/// The running fake.
#[derive(Clone)]
pub struct VertexFake(Arc<Fake>);

impl std::fmt::Debug for VertexFake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VertexFake").field(&self.0.url).finish()
    }
}

impl VertexFake {
    /// Starts a fake that takes grants signed by `public`'s key, making
    /// tokens that live `life` seconds, and takes the tokens `known` too.
    pub async fn start(public: &[u8], life: u64, known: &[&str]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = Arc::new(Fake {
            public: public.to_vec(),
            life,
            tokens: Mutex::new(known.iter().map(|t| t.to_string()).collect()),
            seen: Mutex::default(),
            url,
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self(fake)
    }

    /// Its root, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// What it saw so far.
    pub fn seen(&self) -> Seen {
        self.0.seen.lock().unwrap().clone()
    }
}

async fn handle(
    State(fake): State<Arc<Fake>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if uri.path() == "/token" {
        return match grant(&fake, &body) {
            Ok(claims) => {
                let mut tokens = fake.tokens.lock().unwrap();
                let token = format!("ya29.fake-{}", tokens.len() + 1);
                tokens.push(token.clone());
                fake.seen.lock().unwrap().grants.push(claims);
                let made = json!({"access_token": token, "expires_in": fake.life,
                                  "token_type": "Bearer"});
                axum::Json(made).into_response()
            }
            Err(why) => {
                fake.seen.lock().unwrap().refused.push(why.clone());
                let refusal = json!({"error": "invalid_grant", "error_description": why});
                (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response()
            }
        };
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let path = uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    fake.seen
        .lock()
        .unwrap()
        .requests
        .push((path.clone(), auth.clone()));
    let known = auth
        .strip_prefix("Bearer ")
        .is_some_and(|t| fake.tokens.lock().unwrap().iter().any(|k| k == t));
    if !known {
        let e = json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
                                 "message": "Request had invalid authentication credentials."}});
        return (StatusCode::UNAUTHORIZED, axum::Json(e)).into_response();
    }
    if path.ends_with(":predict") {
        return predict(&body);
    }
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "From Vertex."}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3,
                          "totalTokenCount": 8},
    });
    if path.contains(":streamGenerateContent") {
        let events = format!("data: {answer}\r\n\r\n");
        return ([("content-type", "text/event-stream")], events).into_response();
    }
    axum::Json(answer).into_response()
}

/// A text-embedding prediction for each of the request's `instances`: a
/// vector of `parameters.outputDimensionality` numbers (3 without it),
/// the first its `content`'s length in bytes, and a `token_count` of its
/// words.
fn predict(body: &[u8]) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        let e = json!({"error": {"code": 400, "message": "not JSON"}});
        return (StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
    };
    let size = request["parameters"]["outputDimensionality"]
        .as_u64()
        .unwrap_or(3) as usize;
    let empty = Vec::new();
    let instances = request["instances"].as_array().unwrap_or(&empty);
    let predictions: Vec<Value> = instances
        .iter()
        .map(|i| {
            let content = i["content"].as_str().unwrap_or_default();
            let mut values = vec![json!(0.5); size];
            values[0] = json!(content.len());
            let words = content.split_whitespace().count();
            json!({"embeddings": {"values": values,
                                  "statistics": {"token_count": words, "truncated": false}}})
        })
        .collect();
    axum::Json(json!({"predictions": predictions})).into_response()
}

/// The claims of a JWT bearer grant signed by the fake's key, or why not.
fn grant(fake: &Fake, body: &[u8]) -> Result<Value, String> {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .ok_or(format!("no {name}"))
    };
    if field("grant_type")? != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
        return Err("not a JWT bearer grant".into());
    }
    let assertion = field("assertion")?;
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err("the assertion is not a JWT".into());
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|e| e.to_string());
    let signed = format!("{header}.{claims}");
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &fake.public)
        .verify(signed.as_bytes(), &decode(signature)?)
        .map_err(|_| "Invalid JWT Signature.".to_owned())?;
    let header: Value = serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
    let claims: Value = serde_json::from_slice(&decode(claims)?).map_err(|e| e.to_string())?;
    if header["alg"] != "RS256" {
        return Err(format!("alg {}", header["alg"]));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expected_aud = format!("{}/token", fake.url);
    let fresh = claims["iat"].as_u64().is_some_and(|iat| iat <= now + 5)
        && claims["exp"].as_u64().is_some_and(|exp| exp > now);
    if claims["aud"] != expected_aud.as_str() || !fresh {
        return Err(format!("claims {claims}"));
    }
    Ok(claims)
}

//! Vertex AI (`[providers.NAME] vertex = { … }` on a Gemini-kind
//! provider): Gemini's `generateContent` under a project and a location,
//! authorized by an OAuth bearer token instead of an API key. The token is
//! made from a service-account key file (a signed JWT exchanged at the
//! file's `token_uri`) or printed by a command the operator names, kept
//! until shortly before it expires and made again then, or at once after
//! the provider answers 401.

mod account;
mod command;
pub(crate) mod embeddings;

use crate::auth::Authorize;
use crate::transport::Transport;
use crate::transport::settings::TransportSettings;
use account::Account;
use callai_engine::config::{ConfigError, invalid};
use callai_engine::{BoxFuture, FailureKind, ProviderFailure};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `vertex = { project, location, credentialsFile | tokenCommand }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VertexConfig {
    /// The Google Cloud project ID.
    pub project: String,
    /// The region (`us-central1`, `europe-west4`) or `global`.
    pub location: String,
    /// A service account's JSON key file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
    /// A command whose output is an access token
    /// (`gcloud auth print-access-token`), run by `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_command: Option<String>,
}

/// How long a token a command printed is used before it is run again:
/// the command says nothing of its expiry (gcloud's last an hour).
const COMMAND_TOKEN_LIFE: Duration = Duration::from_secs(300);
/// At most this long before a token endpoint's token expires (half its
/// life, for a short one), a new one is made.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

impl VertexConfig {
    /// Vertex AI's API root for its location.
    pub fn default_base_url(&self) -> String {
        match self.location.as_str() {
            "global" => "https://aiplatform.googleapis.com/v1".into(),
            region => format!("https://{region}-aiplatform.googleapis.com/v1"),
        }
    }

    /// Where Google's models are under the API root.
    pub(crate) fn publisher_path(&self) -> String {
        format!(
            "/projects/{}/locations/{}/publishers/google",
            self.project, self.location
        )
    }

    /// Checks the section `name`'s `vertex`: a project and a location that
    /// make no other path, and one way to a token.
    pub(crate) fn check(&self, name: &str) -> Result<(), ConfigError> {
        let at = |key: &str| format!("providers.{name}.vertex.{key}");
        for (key, value) in [("project", &self.project), ("location", &self.location)] {
            let plain = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !plain {
                return Err(invalid(
                    &at(key),
                    format!("is lower-case letters, digits and '-', got {value:?}"),
                ));
            }
        }
        match (&self.credentials_file, &self.token_command) {
            (Some(_), None) => Ok(()),
            (None, Some(command)) if !command.trim().is_empty() => Ok(()),
            (None, Some(_)) => Err(invalid(&at("tokenCommand"), "is empty".into())),
            _ => Err(invalid(
                &format!("providers.{name}.vertex"),
                "needs credentialsFile (a service account's key file) or tokenCommand, \
                 one of them"
                    .into(),
            )),
        }
    }
}

/// Where tokens come from.
enum Source {
    /// A service account: a JWT it signs, exchanged at its token endpoint
    /// over a transport of the provider's settings.
    Account(Box<Account>, Transport),
    /// A command's output.
    Command(String, Duration),
}

/// A token and when to make the next.
struct Held {
    header: HeaderValue,
    renew_at: Instant,
}

/// The bearer tokens of one Vertex AI provider.
pub(crate) struct Tokens {
    source: Source,
    held: Mutex<Option<Held>>,
    /// Held while a token is made, so that calls arriving meanwhile wait
    /// for it rather than each make their own.
    making: tokio::sync::Mutex<()>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tokens([redacted])")
    }
}

impl Tokens {
    /// The tokens of provider `name`'s `vertex`; a key file is read now,
    /// and an error names it.
    pub(crate) fn start(
        name: &str,
        v: &VertexConfig,
        transport: &TransportSettings,
        env: &dyn Fn(&str) -> Option<String>,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        v.check(name)?;
        let source = match (&v.credentials_file, &v.token_command) {
            (Some(file), _) => {
                let account = Account::read(file).map_err(|why| {
                    let key = format!("providers.{name}.vertex.credentialsFile");
                    invalid(&key, format!("{}: {why}", file.display()))
                })?;
                let at = Transport::new(name, transport, account.token_uri(), env, timeout)?;
                Source::Account(Box::new(account), at)
            }
            (None, command) => {
                let command = command.clone().unwrap_or_default();
                Source::Command(command, timeout)
            }
        };
        Ok(Self {
            source,
            held: Mutex::new(None),
            making: tokio::sync::Mutex::new(()),
        })
    }

    /// The `authorization` header for a request now: the token held, or a
    /// new one when it is near its end. A token not made is a failure
    /// before any request: unreached when the token endpoint could not be
    /// reached (retried), unanswerable when it or the command refused.
    pub(crate) async fn header(&self) -> Result<HeaderValue, ProviderFailure> {
        if let Some(header) = self.current() {
            return Ok(header);
        }
        let _making = self.making.lock().await;
        if let Some(header) = self.current() {
            return Ok(header);
        }
        // How long the token is used.
        let (token, used_for) = match &self.source {
            Source::Account(account, transport) => {
                let (token, life) = account.token(transport).await?;
                (token, life.saturating_sub(REFRESH_MARGIN.min(life / 2)))
            }
            Source::Command(command, timeout) => {
                let token = command::run(command, *timeout).await.map_err(|why| {
                    let why = format!("Vertex AI tokenCommand: {why}");
                    ProviderFailure::new(FailureKind::Unanswerable, None, why)
                })?;
                (token, COMMAND_TOKEN_LIFE)
            }
        };
        let mut header = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            let why = "Vertex AI: the token made is not one an HTTP header can carry";
            ProviderFailure::new(FailureKind::Unanswerable, None, why)
        })?;
        header.set_sensitive(true);
        let renew_at = Instant::now() + used_for;
        *self.held.lock().expect("the token lock") = Some(Held {
            header: header.clone(),
            renew_at,
        });
        Ok(header)
    }

    /// The token held, if it is not yet due for renewal.
    fn current(&self) -> Option<HeaderValue> {
        let held = self.held.lock().expect("the token lock");
        held.as_ref()
            .filter(|h| Instant::now() < h.renew_at)
            .map(|h| h.header.clone())
    }
}

impl Authorize for Tokens {
    fn authorize<'a>(
        &'a self,
        _: &'a url::Url,
        headers: &'a mut HeaderMap,
        _: &'a [u8],
    ) -> BoxFuture<'a, Result<(), ProviderFailure>> {
        Box::pin(async move {
            headers.insert(reqwest::header::AUTHORIZATION, self.header().await?);
            Ok(())
        })
    }

    /// Drops the token held on a 401 (it was revoked or expired early), so
    /// that the next request makes a new one; a 403 is a permission the
    /// token's account lacks, which a new token would lack too.
    fn refused(&self, status: u16) {
        if status == 401 {
            *self.held.lock().expect("the token lock") = None;
        }
    }
}

/// Checks the section `name`'s `vertex` beside its `apiKeyEnv`, when
/// `key_named` (Vertex AI takes no key).
pub(crate) fn check_section(
    name: &str,
    key_named: bool,
    vertex: &VertexConfig,
) -> Result<(), ConfigError> {
    if key_named {
        return Err(invalid(
            &format!("providers.{name}.apiKeyEnv"),
            "Vertex AI takes a bearer token from vertex.credentialsFile or \
             vertex.tokenCommand, not an API key"
                .into(),
        ));
    }
    vertex.check(name)
}

/// What a token endpoint or a command said, for an error: control
/// characters blanked, at most 200 characters, trimmed.
fn said(text: &str) -> String {
    let short: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    short.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vertex(project: &str, location: &str) -> VertexConfig {
        VertexConfig {
            project: project.into(),
            location: location.into(),
            credentials_file: Some("sa.json".into()),
            token_command: None,
        }
    }

    #[test]
    fn the_api_root_follows_the_location() {
        assert_eq!(
            vertex("p", "us-central1").default_base_url(),
            "https://us-central1-aiplatform.googleapis.com/v1"
        );
        assert_eq!(
            vertex("p", "global").default_base_url(),
            "https://aiplatform.googleapis.com/v1"
        );
        assert_eq!(
            vertex("my-proj", "europe-west4").publisher_path(),
            "/projects/my-proj/locations/europe-west4/publishers/google"
        );
    }

    #[test]
    fn vertex_is_for_a_gemini_kind_provider_and_takes_no_key() {
        let how = "vertex = { project = \"p\", location = \"global\", tokenCommand = \"x\" }";
        let check = |section: &str| {
            let sections: crate::ProvidersConfig = toml::from_str(section).unwrap();
            crate::validate(&sections).map(|()| sections)
        };
        let e = check(&format!("[o]\nkind = \"openai\"\n{how}\n")).unwrap_err();
        assert!(e.to_string().contains("providers.o.vertex"), "{e}");
        let e = check(&format!(
            "[v]\nkind = \"gemini\"\napiKeyEnv = \"K\"\n{how}\n"
        ));
        assert!(e.unwrap_err().to_string().contains("providers.v.apiKeyEnv"));
        let ok = check(&format!("[v]\nkind = \"gemini\"\n{how}\n")).unwrap();
        let s = ok["v"].settings("v").unwrap();
        assert_eq!(s.base_url, "https://aiplatform.googleapis.com/v1");
        assert_eq!(s.api_key_env, "");
    }

    #[test]
    fn start_up_names_a_key_file_that_does_not_read() {
        let section = "[v]\nkind = \"gemini\"\nvertex = { project = \"p\", location = \"global\", \
                       credentialsFile = \"/nonexistent/sa.json\" }\n";
        let sections: crate::ProvidersConfig = toml::from_str(section).unwrap();
        let limits = callai_engine::config::Limits::default();
        let e = crate::start(&sections, &|_| None, &limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("providers.v.vertex.credentialsFile"), "{e}");
        assert!(e.contains("/nonexistent/sa.json: cannot read"), "{e}");
    }

    #[test]
    fn a_project_or_location_that_makes_another_path_is_refused() {
        for (project, location, key) in [
            ("p/../x", "us-central1", "project"),
            ("p", "us-central1?x", "location"),
            ("", "us-central1", "project"),
        ] {
            let e = vertex(project, location)
                .check("v")
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("providers.v.vertex.{key}")), "{e}");
        }
        let mut neither = vertex("p", "global");
        neither.credentials_file = None;
        let e = neither.check("v").unwrap_err().to_string();
        assert!(
            e.contains("credentialsFile") && e.contains("tokenCommand"),
            "{e}"
        );
        neither.token_command = Some("  ".into());
        let e = neither.check("v").unwrap_err().to_string();
        assert!(
            e.contains("vertex.tokenCommand") && e.contains("empty"),
            "{e}"
        );
        let mut both = vertex("p", "global");
        both.token_command = Some("gcloud auth print-access-token".into());
        assert!(both.check("v").is_err());
    }
}

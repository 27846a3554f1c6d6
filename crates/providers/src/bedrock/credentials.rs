//! Where a Bedrock provider's AWS credentials come from, and how they are
//! kept fresh: the environment's `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (read once), or a
//! profile of the shared AWS files (`~/.aws/config`,
//! `~/.aws/credentials`), read by aws-config's parser: static keys, a
//! session token, or a `credential_process` (how SSO and other
//! short-lived credentials reach a program), run by aws-config again
//! before what it gave expires. A profile that assumes a role or signs in
//! with SSO itself needs AWS's STS or SSO service, which this host does
//! not call: it is refused naming the key, with the way round it.

use aws_config::credential_process::CredentialProcessProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_types::os_shim_internal::{Env, Fs};
use callai_engine::{FailureKind, ProviderFailure};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long before they expire a profile's credentials are renewed (half
/// their life, for short ones).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// A Bedrock provider's AWS credentials.
pub(crate) struct Keys {
    source: Source,
    held: Mutex<Option<Held>>,
    /// Held while a profile's credentials are fetched: concurrent requests
    /// wait for one fetch.
    making: tokio::sync::Mutex<()>,
}

enum Source {
    /// The environment's, for the life of the process.
    Fixed(Credentials),
    /// A profile's, fetched when needed.
    Profile {
        name: String,
        files: Vec<(EnvConfigFileKind, PathBuf)>,
    },
}

struct Held {
    credentials: Credentials,
    /// When to fetch again; never, for credentials that do not expire.
    renew_at: Option<SystemTime>,
}

impl Keys {
    /// The credentials `profile` names, else the environment's when
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` are set, else
    /// `AWS_PROFILE`'s or the `default` profile where the shared files
    /// exist; why none, naming what to set. `env` reads the variables
    /// (`AWS_CONFIG_FILE` and `AWS_SHARED_CREDENTIALS_FILE` move the files
    /// from under `HOME`).
    pub(crate) fn choose(
        profile: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let var = |name| env(name).filter(|v: &String| !v.is_empty());
        let source = match (
            profile,
            var("AWS_ACCESS_KEY_ID"),
            var("AWS_SECRET_ACCESS_KEY"),
        ) {
            (Some(name), _, _) => Source::Profile {
                name: name.to_owned(),
                files: files(env),
            },
            (None, Some(id), Some(secret)) => Source::Fixed(Credentials::new(
                id,
                secret,
                var("AWS_SESSION_TOKEN"),
                None,
                "environment",
            )),
            (None, _, _) => {
                let files = files(env);
                let named = var("AWS_PROFILE");
                if named.is_none() && !files.iter().any(|(_, f)| f.is_file()) {
                    return Err("has no AWS credentials: set AWS_ACCESS_KEY_ID and \
                                AWS_SECRET_ACCESS_KEY, `profile` (a profile of ~/.aws/config), \
                                or apiKeyEnv to a Bedrock API key's variable"
                        .into());
                }
                Source::Profile {
                    name: named.unwrap_or_else(|| "default".to_owned()),
                    files,
                }
            }
        };
        Ok(Self {
            source,
            held: Mutex::new(None),
            making: tokio::sync::Mutex::new(()),
        })
    }

    /// The credentials to sign a request with now: the environment's, or
    /// the profile's held until they are due for renewal. Credentials not
    /// fetched are a failure before any request, naming the profile.
    pub(crate) async fn current(&self) -> Result<Credentials, ProviderFailure> {
        let (name, files) = match &self.source {
            Source::Fixed(credentials) => return Ok(credentials.clone()),
            Source::Profile { name, files } => (name, files),
        };
        if let Some(credentials) = self.fresh() {
            return Ok(credentials);
        }
        let _making = self.making.lock().await;
        if let Some(credentials) = self.fresh() {
            return Ok(credentials);
        }
        let credentials = of_profile(name, files).await.map_err(|why| {
            let why = format!("the AWS profile {name:?} gave no credentials: {why}");
            ProviderFailure::new(FailureKind::Unanswerable, None, why)
        })?;
        let renew_at = credentials.expiry().map(|expiry| {
            let life = expiry.duration_since(SystemTime::now()).unwrap_or_default();
            expiry - REFRESH_MARGIN.min(life / 2)
        });
        *self.held.lock().expect("the credentials lock") = Some(Held {
            credentials: credentials.clone(),
            renew_at,
        });
        Ok(credentials)
    }

    /// The profile's credentials held, if not yet due for renewal.
    fn fresh(&self) -> Option<Credentials> {
        let held = self.held.lock().expect("the credentials lock");
        held.as_ref()
            .filter(|h| h.renew_at.is_none_or(|at| SystemTime::now() < at))
            .map(|h| h.credentials.clone())
    }

    /// AWS refused a request these signed (an expired token is a 403):
    /// a profile's are fetched again for the next.
    pub(crate) fn refused(&self) {
        *self.held.lock().expect("the credentials lock") = None;
    }
}

/// The shared config and credentials files, where `env` puts them: each
/// its variable's path, else under `HOME`'s `.aws` (none without `HOME`).
fn files(env: &dyn Fn(&str) -> Option<String>) -> Vec<(EnvConfigFileKind, PathBuf)> {
    let set = |var: &str| env(var).filter(|v| !v.is_empty());
    let home = set("HOME");
    let at = |var: &str, default: &str| {
        set(var).map(PathBuf::from).or_else(|| {
            home.as_ref()
                .map(|h| PathBuf::from(h).join(".aws").join(default))
        })
    };
    let config = at("AWS_CONFIG_FILE", "config").map(|p| (EnvConfigFileKind::Config, p));
    let credentials = at("AWS_SHARED_CREDENTIALS_FILE", "credentials")
        .map(|p| (EnvConfigFileKind::Credentials, p));
    config.into_iter().chain(credentials).collect()
}

/// The keys of a profile that get credentials from AWS's STS or SSO.
const CALLS_AWS: &[&str] = &[
    "role_arn",
    "sso_session",
    "sso_start_url",
    "credential_source",
    "web_identity_token_file",
    "login_session",
];

/// The credentials profile `name` of `files` (those that exist now)
/// gives: its `credential_process`'s, else its static keys; why none.
async fn of_profile(
    name: &str,
    files: &[(EnvConfigFileKind, PathBuf)],
) -> Result<Credentials, String> {
    let mut there = EnvConfigFiles::builder();
    let mut none = true;
    for (kind, path) in files.iter().filter(|(_, path)| path.is_file()) {
        there = there.with_file(*kind, path);
        none = false;
    }
    if none {
        let paths: Vec<_> = files.iter().map(|(_, p)| p.display().to_string()).collect();
        return Err(format!(
            "no shared AWS file is there ({})",
            paths.join(", ")
        ));
    }
    let override_name = Some(std::borrow::Cow::Owned(name.to_owned()));
    let set = aws_config::profile::load(&Fs::real(), &Env::real(), &there.build(), override_name)
        .await
        .map_err(|e| DisplayErrorContext(e).to_string())?;
    let profile = set
        .get_profile(name)
        .ok_or("no such profile in the shared config or credentials file")?;
    if let Some(command) = profile.get("credential_process") {
        let process = CredentialProcessProvider::new(command.to_owned());
        return process
            .provide_credentials()
            .await
            .map_err(|e| format!("credential_process: {}", DisplayErrorContext(e)));
    }
    if let (Some(id), Some(secret)) = (
        profile.get("aws_access_key_id"),
        profile.get("aws_secret_access_key"),
    ) {
        let token = profile.get("aws_session_token").map(str::to_owned);
        return Ok(Credentials::new(id, secret, token, None, "profile"));
    }
    match CALLS_AWS.iter().find(|key| profile.get(key).is_some()) {
        Some(key) => Err(format!(
            "its {key} asks AWS's STS or SSO for credentials, which this host does not call: \
             give the profile a credential_process (`aws configure export-credentials \
             --profile {name} --format process`)"
        )),
        None => Err(
            "it has neither a credential_process nor aws_access_key_id and \
                     aws_secret_access_key"
                .into(),
        ),
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = match &self.source {
            Source::Fixed(_) => "environment",
            Source::Profile { name, .. } => name,
        };
        f.debug_struct("Keys")
            .field("from", &from)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn with_nothing_set_it_says_what_to_set() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().display().to_string();
        let e = Keys::choose(None, &env_of(&[("HOME", home)])).unwrap_err();
        assert!(
            e.contains("AWS_ACCESS_KEY_ID") && e.contains("`profile`"),
            "{e}"
        );
        let e = Keys::choose(None, &env_of(&[])).unwrap_err();
        assert!(e.contains("apiKeyEnv"), "{e}");
    }

    #[tokio::test]
    async fn the_default_profile_s_static_keys_sign_when_no_variable_is_set() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(
            dir.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s3cret\n\
             [other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = x\n",
        )
        .unwrap();
        let home = dir.path().display().to_string();
        let keys = Keys::choose(None, &env_of(&[("HOME", home.clone())])).unwrap();
        let got = keys.current().await.unwrap();
        assert_eq!(
            (got.access_key_id(), got.secret_access_key()),
            ("AKIDFILE", "s3cret")
        );
        let env = env_of(&[("HOME", home.clone()), ("AWS_PROFILE", "other".into())]);
        let got = Keys::choose(None, &env).unwrap().current().await.unwrap();
        assert_eq!(got.access_key_id(), "AKIDOTHER");
        // A profile the files lack fails the request, naming it.
        let keys = Keys::choose(Some("absent"), &env_of(&[("HOME", home)])).unwrap();
        let e = keys.current().await.unwrap_err();
        assert!(e.message.contains("\"absent\""), "{}", e.message);
    }

    #[tokio::test]
    async fn a_credential_process_runs_once_until_its_credentials_near_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let script = dir.path().join("creds.sh");
        std::fs::write(
            &script,
            format!(
                "echo run >> '{}'\nexp=$(date -u -d \"+$1 seconds\" +%Y-%m-%dT%H:%M:%SZ)\n\
                 printf '{{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \
                 \"SecretAccessKey\": \"s\", \"SessionToken\": \"t\", \"Expiration\": \"%s\"}}' \"$exp\"\n",
                runs.display()
            ),
        )
        .unwrap();
        let config = dir.path().join("config");
        std::fs::write(
            &config,
            format!(
                "[profile ci]\ncredential_process = sh {0} 3600\n\
                 [profile brief]\ncredential_process = sh {0} 1\n\
                 [profile assumed]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = ci\n\
                 [profile garbage]\ncredential_process = echo not-json\n\
                 [profile failing]\ncredential_process = sh -c 'echo denied >&2; exit 3'\n",
                script.display()
            ),
        )
        .unwrap();
        let env = env_of(&[("AWS_CONFIG_FILE", config.display().to_string())]);
        let keys = Keys::choose(Some("ci"), &env).unwrap();
        let count = || std::fs::read_to_string(&runs).unwrap().lines().count();
        for _ in 0..3 {
            let got = keys.current().await.unwrap();
            assert_eq!(
                (got.access_key_id(), got.session_token()),
                ("AKIDPROC", Some("t"))
            );
        }
        assert_eq!(count(), 1, "held while fresh");
        // A 403 (an expired token) drops them.
        keys.refused();
        keys.current().await.unwrap();
        assert_eq!(count(), 2);
        // Credentials of at most a second are due for renewal within half
        // of it: run again after it.
        let brief = Keys::choose(Some("brief"), &env).unwrap();
        brief.current().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        brief.current().await.unwrap();
        assert_eq!(count(), 4);
        // A process that prints no credentials, or fails, fails the
        // request, naming the profile and saying what went wrong.
        for (name, why) in [("garbage", "credential_process"), ("failing", "exit")] {
            let keys = Keys::choose(Some(name), &env).unwrap();
            let e = keys.current().await.unwrap_err().message;
            assert!(e.contains(&format!("{name:?}")) && e.contains(why), "{e}");
        }
        // A role to assume is STS's to give: refused, saying what to do.
        let keys = Keys::choose(Some("assumed"), &env).unwrap();
        let e = keys.current().await.unwrap_err().message;
        assert!(
            e.contains("role_arn") && e.contains("export-credentials"),
            "{e}"
        );
    }
}

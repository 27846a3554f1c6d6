//! Every caller the server knows, by token: `[server] tokenEnv`'s (the
//! admin, no budget), the metrics scraper's, and each `[tenants.NAME]`,
//! known by its own bearer token, every token compared in constant time.

use super::allotment::Holder;
use super::caller::{ADMIN, Tenant};
use super::keys::{KeySetup, KeyTable};
use super::limited::Limited;
use super::plan::Plan;
use crate::config::TenantsConfig;
use callai_engine::config::{ConfigError, invalid};
use callai_engine::{Host, RunLog};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use subtle::ConstantTimeEq;

/// Every caller the server knows, by token.
#[derive(Debug)]
pub struct Tenants {
    admin: Arc<Tenant>,
    /// `[server] tokenEnv`'s token; none: see [`Tenants::open`].
    admin_token: Option<Token>,
    /// `[server] metricsTokenEnv`'s token: reads `/metrics`, nothing else.
    metrics_token: Option<Token>,
    tenants: Vec<(Token, Arc<Tenant>)>,
    /// The API keys of the run log, once it has one.
    keys: KeyTable,
}

/// The tokens of the server itself, beside its tenants'.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerTokens<'a> {
    /// `[server] tokenEnv`'s: the admin's.
    pub admin: Option<&'a str>,
    /// `[server] metricsTokenEnv`'s: `/metrics` only.
    pub metrics: Option<&'a str>,
}

/// A bearer token, never printed.
struct Token(Box<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<token>")
    }
}

impl Tenants {
    /// The callers of `host`: the admin (with `tokens.admin`, if any), a
    /// metrics scraper (with `tokens.metrics`, if any) and every tenant of
    /// `config`, their tokens read through `env`. A token variable that is
    /// unset or empty, a token two callers share, or an `allowedProviders`
    /// naming a provider the host does not have stops start-up naming the
    /// key.
    pub fn new(
        host: &Host,
        tokens: ServerTokens<'_>,
        config: &TenantsConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let admin_token = tokens.admin;
        if tokens.metrics.is_some() && tokens.metrics == admin_token {
            return Err(invalid(
                "server.metricsTokenEnv",
                "its token is the admin's; the metrics token needs one of its own".into(),
            ));
        }
        let admin = Arc::new(Tenant {
            name: ADMIN.into(),
            host: host.clone(),
            plans: Vec::new(),
            limited: OnceLock::new(),
            allowed_models: None,
        });
        let mut tenants: Vec<(Token, Arc<Tenant>)> = Vec::new();
        let known: Vec<&str> = host.providers().names().collect();
        for (name, section) in config {
            let key = |k: &str| format!("tenants.{name}.{k}");
            let token = env(&section.token_env)
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    invalid(
                        &key("tokenEnv"),
                        format!("the variable {} holds no token", section.token_env),
                    )
                })?;
            let shared = admin_token == Some(token.as_str())
                || tokens.metrics == Some(token.as_str())
                || tenants.iter().any(|(t, _)| *t.0 == *token.as_bytes());
            if shared {
                return Err(invalid(
                    &key("tokenEnv"),
                    "its token is another caller's; every tenant needs a token of its own".into(),
                ));
            }
            let host = match &section.allowed_providers {
                Some(allowed) => {
                    for (i, provider) in allowed.iter().enumerate() {
                        if !known.contains(&provider.as_str()) {
                            return Err(invalid(
                                &key(&format!("allowedProviders[{i}]")),
                                format!(
                                    "names provider {provider:?}, which this host does not have (known: {known:?})"
                                ),
                            ));
                        }
                    }
                    host.narrowed_to(allowed)
                }
                None => host.clone(),
            };
            // Its calls' schemas are its own in the cache all tenants share.
            let mut host = host.owned_by(name);
            if let Some(n) = section.default_max_tokens {
                // Checked to be 1..providerMaxTokens with the config.
                host = host.with_default_max_tokens(u32::try_from(n).unwrap_or(1));
            }
            let plans = Plan::of_budget(name, &section.budget)
                .into_iter()
                .chain(section.limits.iter().map(|l| Plan::of_limit(name, l)))
                .collect();
            let tenant = Tenant {
                name: name.clone(),
                host,
                plans,
                limited: OnceLock::new(),
                allowed_models: None,
            };
            tenants.push((Token(token.into_bytes().into()), Arc::new(tenant)));
        }
        Ok(Self {
            admin,
            admin_token: admin_token.map(|t| Token(t.as_bytes().into())),
            metrics_token: tokens.metrics.map(|t| Token(t.as_bytes().into())),
            tenants,
            keys: KeyTable::default(),
        })
    }

    /// Whether `given` is the metrics token (compared in constant time).
    pub fn is_metrics_token(&self, given: &[u8]) -> bool {
        self.metrics_token
            .as_ref()
            .is_some_and(|t| bool::from(given.ct_eq(&t.0)))
    }

    /// No token anywhere: every request is the admin's (a server listening
    /// on loopback only).
    pub fn open(&self) -> bool {
        self.admin_token.is_none() && self.tenants.is_empty()
    }

    /// Every tenant with a limit (which needs a run log).
    pub fn budgeted(&self) -> impl Iterator<Item = &str> {
        self.tenants
            .iter()
            .filter(|(_, t)| !t.plans.is_empty())
            .map(|(_, t)| t.name.as_str())
    }

    /// Gives every tenant with limits its allotment of each on `log`, held
    /// by `holder`, its calls waiting up to `queue` for room (once: a
    /// tenant that has them keeps them).
    pub fn allot(&self, log: &Arc<dyn RunLog>, holder: &Holder<'_>, queue: Duration) {
        for (_, tenant) in &self.tenants {
            if let Some(limited) = Limited::new(log, &tenant.name, &tenant.plans, holder, queue) {
                let _ = tenant.limited.set(limited);
            }
        }
        let _ = self.keys.setup.set(KeySetup {
            log: log.clone(),
            owner: holder.owner.to_owned(),
            ttl: holder.ttl,
            metrics: holder.metrics.clone(),
            queue,
        });
    }

    /// The API keys this host knows.
    pub fn keys(&self) -> &KeyTable {
        &self.keys
    }

    /// The limits of every tenant this host holds.
    pub fn limited(&self) -> impl Iterator<Item = &Arc<Limited>> {
        self.tenants.iter().filter_map(|(_, t)| t.limited.get())
    }

    /// Every tenant, the admin first.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Tenant>> {
        std::iter::once(&self.admin).chain(self.tenants.iter().map(|(_, t)| t))
    }

    /// Every tenant's name, the admin's first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.all().map(|t| t.name.as_str())
    }

    /// The admin.
    pub fn admin(&self) -> &Arc<Tenant> {
        &self.admin
    }

    /// The tenant named `name` (a durable run's, when another host takes
    /// it over).
    pub fn by_name(&self, name: &str) -> Option<&Arc<Tenant>> {
        if name == ADMIN {
            return Some(&self.admin);
        }
        self.tenants
            .iter()
            .find(|(_, t)| t.name == name)
            .map(|(_, t)| t)
    }

    /// The caller whose token `given` is: an API key's (`ck-…`, by its
    /// keyed hash), or a configured one's. Every configured token is
    /// compared, in constant time, so the time taken tells neither how much
    /// of a guess was right nor whose token it was near.
    pub fn resolve(&self, given: &[u8]) -> Option<Arc<Tenant>> {
        if let Some(key) = self.keys.resolve(given) {
            return Some(key);
        }
        let mut found = None;
        if let Some(admin) = &self.admin_token
            && bool::from(given.ct_eq(&admin.0))
        {
            found = Some(&self.admin);
        }
        for (token, tenant) in &self.tenants {
            if bool::from(given.ct_eq(&token.0)) {
                found = Some(tenant);
            }
        }
        found.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::HostConfig;

    /// The `[tenants]` of a config file.
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        tenants: TenantsConfig,
    }

    fn tenants(toml: &str, env: &[(&str, &str)]) -> Result<Tenants, ConfigError> {
        let config: File = toml::from_str(toml).unwrap();
        let host = Host::builder(HostConfig::default()).build().unwrap();
        let env = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        };
        let tokens = ServerTokens {
            admin: Some("admin-token"),
            metrics: Some("metrics-token"),
        };
        Tenants::new(&host, tokens, &config.tenants, &env)
    }

    #[test]
    fn each_token_resolves_to_its_tenant() {
        let t = tenants(
            "[tenants.a]\ntokenEnv = \"A\"\n[tenants.b]\ntokenEnv = \"B\"\n[tenants.b.budget]\nrequests = 5\n",
            &[("A", "tok-a"), ("B", "tok-b")],
        )
        .unwrap();
        assert_eq!(t.resolve(b"tok-a").unwrap().name, "a");
        assert_eq!(t.resolve(b"tok-b").unwrap().name, "b");
        assert_eq!(t.resolve(b"admin-token").unwrap().name, ADMIN);
        assert!(t.resolve(b"tok-c").is_none() && t.resolve(b"").is_none());
        // The metrics token reads /metrics and is no caller of the API.
        assert!(t.resolve(b"metrics-token").is_none());
        assert!(t.is_metrics_token(b"metrics-token") && !t.is_metrics_token(b"tok-a"));
        assert_eq!(t.budgeted().collect::<Vec<_>>(), ["b"]);
        assert!(!t.open());
        assert!(!format!("{t:?}").contains("tok-a"));
    }

    #[test]
    fn tokens_and_providers_are_checked_at_start_up() {
        let e = tenants("[tenants.a]\ntokenEnv = \"A\"\n", &[]).unwrap_err();
        assert!(e.to_string().contains("tenants.a.tokenEnv"), "{e}");
        let e = tenants(
            "[tenants.a]\ntokenEnv = \"A\"\n[tenants.b]\ntokenEnv = \"B\"\n",
            &[("A", "same"), ("B", "same")],
        )
        .unwrap_err();
        assert!(e.to_string().contains("tenants.b.tokenEnv"), "{e}");
        let e = tenants(
            "[tenants.a]\ntokenEnv = \"A\"\nallowedProviders = [\"mock\", \"nope\"]\n",
            &[("A", "x")],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("tenants.a.allowedProviders[1]"),
            "{e}"
        );
    }

    #[test]
    fn allowed_providers_narrow_the_hosts_policy() {
        let t = tenants(
            "[tenants.a]\ntokenEnv = \"A\"\nallowedProviders = []\n",
            &[("A", "x")],
        )
        .unwrap();
        let a = t.by_name("a").unwrap();
        assert!(a.host.allowed_providers().is_empty());
        assert_eq!(t.admin().host.allowed_providers(), ["mock"]);
    }
}

//! Where a call goes, resolved once, before anything runs: a model name
//! `[models.NAME]` routes (the engine picks its targets), or a provider
//! and maybe a model of it. What the call may carry follows from it: a
//! mock script is for the mock alone.

use crate::error::GatewayError;
use crate::tenants::Caller;
use callai_engine::Host;
use callai_engine::config::route_of;
use callai_engine::wire::{CallRequest, CallResult};
use smol_str::SmolStr;

/// Whether `[models]` routes `name`: an entry of its own, or a family's.
fn routed(host: &Host, name: &str) -> bool {
    route_of(&host.config().models, name).is_some()
}

/// Where a call goes. Its names are inline when short, as most are: a
/// route is made for every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A model name `[models.NAME]` routes: the engine picks its targets.
    Model(SmolStr),
    /// A provider, and the model when the caller named one (else the
    /// provider's own).
    Provider {
        /// The provider.
        provider: SmolStr,
        /// The model asked of it.
        model: Option<SmolStr>,
    },
}

impl Route {
    /// Whether `allowed` (a key's `allowedModels`) names it: a routed
    /// model by its name, a provider's model as `PROVIDER/MODEL` or as
    /// the model alone, a provider's own model by the provider.
    pub fn allowed_by(&self, allowed: &[String]) -> bool {
        match self {
            Self::Model(name) => allowed.iter().any(|a| a == name.as_str()),
            Self::Provider { provider, model } => allowed.iter().any(|a| match model {
                Some(m) => *a == format!("{provider}/{m}") || a == m.as_str(),
                None => a == provider.as_str(),
            }),
        }
    }

    /// How a refusal names it.
    pub fn shown(&self) -> String {
        match self {
            Self::Model(name) => format!("{name:?}"),
            Self::Provider {
                provider,
                model: Some(m),
            } => format!("{:?}", format!("{provider}/{m}")),
            Self::Provider { provider, .. } => format!("{provider:?}"),
        }
    }

    /// Where a drop-in's `model` goes: a routed model name (its own entry
    /// or a family's, `[models."gpt-4o*"]`), else `PROVIDER/MODEL`, or a
    /// provider alone (its configured model); else, a bare name, that model
    /// of `[defaults] provider`, unless that is the mock (which answers any
    /// name: an app moved here by its base URL must not believe the mock is
    /// the model it asked for), which refuses it naming `model`, with what
    /// it could have been.
    pub fn of_model(host: &Host, model: &str) -> Result<Self, GatewayError> {
        if routed(host, model) {
            return Ok(Self::Model(model.into()));
        }
        let providers = host.providers();
        if let Some((provider, name)) = model.split_once('/')
            && providers.get(provider).is_some()
            && !name.is_empty()
        {
            return Ok(Self::Provider {
                provider: provider.into(),
                model: Some(name.into()),
            });
        }
        if providers.get(model).is_some() {
            return Ok(Self::Provider {
                provider: model.into(),
                model: None,
            });
        }
        let default = host.config().defaults.provider.as_str();
        if default != "mock" && !model.is_empty() {
            return Ok(Self::Provider {
                provider: default.into(),
                model: Some(model.into()),
            });
        }
        let known: Vec<&str> = providers.names().collect();
        let routes = &host.config().models;
        let message = if routes.is_empty() {
            format!(
                "{model:?} names no provider of this host: use PROVIDER/MODEL or PROVIDER, \
                 with one of {known:?}"
            )
        } else {
            let routed: Vec<&String> = routes.keys().collect();
            format!(
                "{model:?} names no model or provider of this host: use a model name of \
                 [models] ({routed:?}), PROVIDER/MODEL or PROVIDER, with one of {known:?}"
            )
        };
        Err(GatewayError::invalid("model", message))
    }

    /// Where a ctx.callAI request goes (`POST /v1/call`): the provider it
    /// names, else the model name it routes, else the host's default
    /// provider. Whether that provider exists is the engine's to say.
    pub fn of_request(host: &Host, request: &CallRequest) -> Self {
        let model = request.model.as_deref().map(SmolStr::from);
        match (&request.provider, model) {
            (Some(provider), model) => Self::Provider {
                provider: provider.into(),
                model,
            },
            (None, Some(name)) if routed(host, &name) => Self::Model(name),
            (None, model) => Self::Provider {
                provider: host.config().defaults.provider.as_str().into(),
                model,
            },
        }
    }

    /// Points `request` where the route goes: a routed name for the engine
    /// to route, or the provider (and model) named.
    pub fn apply(&self, request: &mut CallRequest) {
        match self {
            Self::Model(name) => {
                request.provider = None;
                request.model = Some(name.to_string());
            }
            Self::Provider { provider, model } => {
                request.provider = Some(provider.to_string());
                if let Some(model) = model {
                    request.model = Some(model.to_string());
                }
            }
        }
    }

    /// Whether it may reach the mock (a routed name, when one of its
    /// targets is the mock): a call that may not needs no mock of its own.
    pub fn reaches_mock(&self, host: &Host) -> bool {
        match self {
            Self::Provider { provider, .. } => provider == "mock",
            Self::Model(name) => route_of(&host.config().models, name)
                .is_some_and(|(_, route)| route.target_names().any(|t| t.provider == "mock")),
        }
    }

    /// The first provider it may reach that `caller`'s host has and may
    /// call, other than the mock: a call with a mock script must have none.
    pub fn real_provider(&self, caller: &Caller) -> Option<String> {
        let host = &caller.0.host;
        let reaches = |p: &str| {
            p != "mock" && host.providers().get(p).is_some() && host.config().provider_allowed(p)
        };
        match self {
            Self::Provider { provider, .. } => reaches(provider).then(|| provider.to_string()),
            Self::Model(name) => route_of(&host.config().models, name)?
                .1
                .target_names()
                .map(|t| t.provider)
                .find(|p| reaches(p))
                .map(str::to_owned),
        }
    }

    /// The model an answer names: the routed name the caller sent, or
    /// `PROVIDER/MODEL` (the model that answered, else the one asked, else
    /// the provider's own), as `/v1/models` lists them.
    pub fn answer_model(&self, host: &Host, result: &CallResult) -> String {
        let (provider, model) = match self {
            Self::Model(name) => return name.to_string(),
            Self::Provider { provider, model } => (provider, model),
        };
        let model = result
            .model
            .as_deref()
            .or(model.as_deref())
            .or_else(|| {
                let (_, found) = host.providers().get(provider)?;
                Some(found.default_model())
            })
            .unwrap_or_default();
        format!("{provider}/{model}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tenants::{Caller, Tenant};
    use callai_engine::{HostConfig, MockProvider, MockScript};
    use std::sync::Arc;

    /// A host with the mock, a second provider `real` (a mock by another
    /// name) and the routes `fast` (to `real`, then the mock) and `dry`
    /// (to the mock alone).
    pub(crate) fn host(allowed: Option<&[&str]>) -> Host {
        let mut toml = String::from(
            "[models.fast]\ntargets = [\"real/m1\", \"mock\"]\n[models.dry]\ntargets = [\"mock\"]\n",
        );
        if let Some(allowed) = allowed {
            toml.push_str(&format!("[policy]\nallowedProviders = {allowed:?}\n"));
        }
        let config = HostConfig::from_toml(&toml).unwrap();
        let mock = || {
            MockProvider::new(
                MockScript::from_json("[]").unwrap(),
                callai_engine::wire::StructuredOutput::Native,
            )
        };
        Host::builder(config)
            .mock(mock())
            .provider("real", Arc::new(mock()))
            .build()
            .unwrap()
    }

    pub(crate) fn caller(host: Host) -> Caller {
        Caller(Arc::new(Tenant {
            name: "t".into(),
            host,
            plans: Vec::new(),
            limited: Default::default(),
            allowed_models: None,
        }))
    }

    #[test]
    fn a_drop_in_model_is_a_route_a_provider_and_model_or_a_provider() {
        let host = host(None);
        assert_eq!(
            Route::of_model(&host, "fast").unwrap(),
            Route::Model("fast".into())
        );
        assert_eq!(
            Route::of_model(&host, "real/gpt-x/mini").unwrap(),
            Route::Provider {
                provider: "real".into(),
                model: Some("gpt-x/mini".into())
            }
        );
        assert_eq!(
            Route::of_model(&host, "mock").unwrap(),
            Route::Provider {
                provider: "mock".into(),
                model: None
            }
        );
        let e = Route::of_model(&host, "nope/m").unwrap_err();
        let GatewayError::Invalid { field, message } = e else {
            panic!("{e:?}")
        };
        assert_eq!(field, "model");
        assert!(message.contains("[\"dry\", \"fast\"]"), "{message}");
    }

    #[test]
    fn a_request_goes_where_it_names_else_its_route_else_the_default() {
        let host = host(None);
        let request = |json: &str| -> CallRequest { serde_json::from_str(json).unwrap() };
        let of = |json: &str| Route::of_request(&host, &request(json));
        assert_eq!(
            of(r#"{"messages": [], "provider": "real", "model": "m2"}"#),
            Route::Provider {
                provider: "real".into(),
                model: Some("m2".into())
            }
        );
        assert_eq!(
            of(r#"{"messages": [], "model": "fast"}"#),
            Route::Model("fast".into())
        );
        assert_eq!(
            of(r#"{"messages": [], "model": "m3"}"#),
            Route::Provider {
                provider: "mock".into(),
                model: Some("m3".into())
            }
        );
    }

    #[test]
    fn a_script_may_go_only_where_the_caller_reaches_the_mock_alone() {
        let open = caller(host(None));
        let mock = Route::Provider {
            provider: "mock".into(),
            model: None,
        };
        assert_eq!(mock.real_provider(&open), None);
        assert_eq!(Route::Model("dry".into()).real_provider(&open), None);
        assert_eq!(
            Route::Model("fast".into()).real_provider(&open).as_deref(),
            Some("real")
        );
        // A provider the caller may not reach, or that is not there, is
        // the engine's to refuse, not the script's.
        let narrow = caller(host(Some(&["mock"])));
        assert_eq!(Route::Model("fast".into()).real_provider(&narrow), None);
        let unknown = Route::Provider {
            provider: "nope".into(),
            model: None,
        };
        assert_eq!(unknown.real_provider(&open), None);
        let host = host(None);
        assert!(Route::Model("fast".into()).reaches_mock(&host));
        assert!(!Route::Model("nope".into()).reaches_mock(&host));
    }
}

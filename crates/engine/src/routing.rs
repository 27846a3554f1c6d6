//! Where a call goes: the provider it names, or the targets of the model
//! name it routes (`[models.NAME]`), in the order the call tries them, as
//! the host's policy allows.

use crate::config::{ConfigError, HostConfig, ModelKind, TargetName, invalid};
use crate::engine::Target;
use crate::host::Host;
use crate::provider::{Provider, Providers};
use callai_wire::{CallError, CallRequest, ErrorCode};

/// One call's chain: its targets in the order it tries them, and each
/// one's provider (parallel to `targets`).
pub(crate) struct Chain<'h> {
    /// The model name routed, when the request named one.
    pub route: Option<&'h str>,
    /// Where its requests may go, first to last.
    pub targets: Vec<Target<'h>>,
    /// Each target's provider, by name.
    pub providers: Vec<(&'h str, &'h dyn Provider)>,
}

impl<'h> Chain<'h> {
    /// The chain of the targets whose provider `takes`, and the names of
    /// the providers left out.
    fn keep(self, takes: impl Fn(&Target<'_>, &dyn Provider) -> bool) -> (Self, Vec<&'h str>) {
        let refused = (self.targets.iter().zip(&self.providers))
            .filter(|(t, (_, p))| !takes(t, *p))
            .map(|(_, (name, _))| *name)
            .collect();
        let (targets, providers): (Vec<_>, Vec<_>) = self
            .targets
            .into_iter()
            .zip(self.providers)
            .filter(|(t, (_, p))| takes(t, *p))
            .unzip();
        let chain = Self {
            route: self.route,
            targets,
            providers,
        };
        (chain, refused)
    }

    /// The largest hidden input per attempt any target adds: what a budget
    /// reserves per attempt, whichever target it reaches.
    pub fn overhead(&self) -> u64 {
        self.providers
            .iter()
            .map(|(_, p)| p.input_overhead_tokens())
            .max()
            .unwrap_or(0)
    }
}

/// Checks that every route's targets name providers the host has.
pub(crate) fn check_routes(config: &HostConfig, providers: &Providers) -> Result<(), ConfigError> {
    for (name, route) in &config.models {
        for (i, target) in route.target_names().enumerate() {
            if providers.get(target.provider).is_none() {
                let known: Vec<&str> = providers.names().collect();
                return Err(invalid(
                    &format!("models.{name}.targets[{i}]"),
                    format!(
                        "names provider {:?}, which this host does not have (known: {known:?})",
                        target.provider
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl Host {
    /// The chain a request goes to, or the refusal made before any request:
    /// a provider it names (with the model it names, or the provider's
    /// own); else the route of the model it names, when `[models]` has
    /// one; else the default provider.
    pub(crate) fn chain(&self, request: &CallRequest) -> Result<Chain<'_>, CallError> {
        let mut chain = self.targets_of(request)?;
        if let Some(cache) = request.prompt_cache.as_deref().filter(|c| !c.is_empty()) {
            chain = cache_takers(chain, &cache.field)?;
        }
        if request.thinking.as_deref().is_some_and(|t| t.required()) {
            chain = thinking_takers(chain)?;
        }
        if request.embedding.is_some() {
            chain = embedding_takers(chain)?;
        }
        if request.reasoning_effort.is_some() {
            chain = reasoning_takers(chain)?;
        }
        match first_image(request) {
            Some(field) => self.image_takers(chain, &field),
            None => Ok(chain),
        }
    }

    /// The chain of a request, before its images are looked at.
    fn targets_of(&self, request: &CallRequest) -> Result<Chain<'_>, CallError> {
        if request.provider.is_none()
            && let Some(asked) = request.model.as_deref()
            && let Some((name, route)) = crate::config::route_of(&self.config().models, asked)
        {
            // A family's target that names no model is asked for the name
            // the call sent; an entry's, for its provider's own.
            let family = crate::config::is_family(name).then_some(asked);
            // Draw only for a weighted route: the others never vary.
            let draw = if route.weights.is_some() {
                self.effects().jitter.draw()
            } else {
                0.0
            };
            if route.kind == ModelKind::Embedding && request.embedding.is_none() {
                return Err(CallError::validation(
                    "model",
                    format!(
                        "{name:?} is an embedding model ([models.{name:?}] kind = \"embedding\"): \
                         send it to /v1/embeddings"
                    ),
                ));
            }
            let names: Vec<TargetName<'_>> = route.target_names().collect();
            let mut chain = Chain {
                route: Some(name),
                targets: Vec::with_capacity(names.len()),
                providers: Vec::with_capacity(names.len()),
            };
            for i in route.order(draw) {
                let target = names[i];
                if let Some(found) = self.providers().get(target.provider)
                    && self.config().provider_allowed(target.provider)
                {
                    chain.push(found, target.model.or(family));
                }
            }
            chain.order_by_health(self);
            if chain.targets.is_empty() {
                return Err(CallError::new(
                    ErrorCode::PolicyDenied,
                    format!(
                        "model {name:?} routes to {:?}, none of which this host's policy allows",
                        route.targets
                    ),
                )
                .with_detail("model", name));
            }
            return Ok(chain);
        }
        let found = self.provider_of(request)?;
        let mut chain = Chain {
            route: None,
            targets: Vec::with_capacity(1),
            providers: Vec::with_capacity(1),
        };
        chain.push(found, request.model.as_deref());
        Ok(chain)
    }

    /// `chain` without the targets whose provider takes no images
    /// (`vision = false`), for a request whose first image is at `field`;
    /// refused naming it when none is left. Each image's inline bytes are
    /// held to `[limits] maxImageBytes`.
    fn image_takers<'h>(&self, chain: Chain<'h>, field: &str) -> Result<Chain<'h>, CallError> {
        let (chain, refused) = chain.keep(|_, p| p.takes_images());
        if chain.targets.is_empty() {
            return Err(CallError::validation(
                field,
                format!(
                    "an image, which {refused:?} cannot take (its provider section says \
                     vision = false): send text, or name a provider whose model takes images"
                ),
            ));
        }
        Ok(chain)
    }

    /// Refuses more images than `[limits] maxImages`, and an image whose
    /// inline bytes pass `[limits] maxImageBytes`, naming it.
    pub(crate) fn check_image_sizes(&self, request: &CallRequest) -> Result<(), CallError> {
        let limits = &self.config().limits;
        let count: usize = request.messages.iter().map(|m| m.images.len()).sum();
        if count > limits.max_images as usize {
            return Err(CallError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "limits.maxImages: the request carries {count} images, over the limit of {}",
                    limits.max_images
                ),
            )
            .with_detail("field", "messages"));
        }
        let limit = limits.max_image_bytes;
        for (i, m) in request.messages.iter().enumerate() {
            for (j, image) in m.images.iter().enumerate() {
                if let Some(bytes) = image.data_bytes().filter(|&b| b > limit) {
                    return Err(CallError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "limits.maxImageBytes: messages[{i}].images[{j}] carries {bytes} \
                             bytes, over the limit of {limit}"
                        ),
                    )
                    .with_detail("field", format!("messages[{i}].images[{j}]")));
                }
            }
        }
        Ok(())
    }

    /// Model names this host routes that the policy lets a request reach
    /// (at least one target allowed).
    pub fn routed_models(&self) -> Vec<(&str, ModelKind)> {
        let config = self.config();
        config
            .models
            .iter()
            .filter(|(_, route)| {
                route
                    .target_names()
                    .any(|t| config.provider_allowed(t.provider))
            })
            .map(|(name, route)| (name.as_str(), route.kind))
            .collect()
    }

    /// The provider a request names (or the default), or the refusal.
    fn provider_of(
        &self,
        request: &CallRequest,
    ) -> Result<(&str, &std::sync::Arc<dyn Provider>), CallError> {
        let name = request
            .provider
            .as_deref()
            .unwrap_or(&self.config().defaults.provider);
        let Some(found) = self.providers().get(name) else {
            let known: Vec<&str> = self.allowed_providers();
            return Err(CallError::validation(
                "provider",
                format!("names {name:?}, which this host does not have (known: {known:?})"),
            ));
        };
        if !self.config().provider_allowed(name) {
            return Err(CallError::new(
                ErrorCode::PolicyDenied,
                format!("provider {name:?} is not allowed by this host's policy"),
            )
            .with_detail("provider", name));
        }
        Ok(found)
    }
}

/// `chain` without the targets whose provider cannot think, for a request
/// that asks the model to; refused naming `thinking` when none is left.
fn thinking_takers(chain: Chain<'_>) -> Result<Chain<'_>, CallError> {
    let (chain, refused) = chain.keep(|_, p| p.takes_thinking());
    if chain.targets.is_empty() {
        return Err(CallError::validation(
            "thinking",
            format!(
                "extended thinking, which {refused:?} cannot take (an Anthropic- or \
                 Bedrock-kind provider takes it): leave thinking out, or route the call to one"
            ),
        ));
    }
    Ok(chain)
}

/// `chain` without the targets whose model takes no reasoning effort, for a
/// request that sets one; refused naming `reasoningEffort` when none is
/// left.
fn reasoning_takers(chain: Chain<'_>) -> Result<Chain<'_>, CallError> {
    let (chain, refused) = chain.keep(|t, p| p.takes_reasoning(&t.model));
    if chain.targets.is_empty() {
        return Err(CallError::validation(
            "reasoningEffort",
            format!(
                "a reasoning effort, which the models of {refused:?} do not take (OpenAI's \
                 reasoning models do: o1, o3, o4, gpt-5): leave it out, or route the call to one"
            ),
        ));
    }
    Ok(chain)
}

/// `chain` without the targets whose provider serves no embeddings, for an
/// embedding call; refused naming `model` when none is left.
fn embedding_takers(chain: Chain<'_>) -> Result<Chain<'_>, CallError> {
    let (chain, refused) = chain.keep(|_, p| p.takes_embeddings());
    if chain.targets.is_empty() {
        return Err(CallError::validation(
            "model",
            format!(
                "an embedding, which {refused:?} does not serve (an OpenAI-kind provider                  does): name an embedding model of one"
            ),
        ));
    }
    Ok(chain)
}

/// `chain` without the targets whose provider takes no prompt-caching
/// breakpoints, for a request that set one at `field`; refused naming it
/// when none is left.
fn cache_takers<'h>(chain: Chain<'h>, field: &str) -> Result<Chain<'h>, CallError> {
    let (chain, refused) = chain.keep(|_, p| p.takes_prompt_cache());
    if chain.targets.is_empty() {
        return Err(CallError::validation(
            field,
            format!(
                "a prompt-caching breakpoint, which {refused:?} cannot take (an Anthropic- or \
                 Bedrock-kind provider takes it): leave cache_control out, or route the call to one"
            ),
        ));
    }
    Ok(chain)
}

/// The field of a request's first image, if it carries any.
fn first_image(request: &CallRequest) -> Option<String> {
    request
        .messages
        .iter()
        .enumerate()
        .find_map(|(i, m)| (!m.images.is_empty()).then(|| format!("messages[{i}].images[0]")))
}

impl<'h> Chain<'h> {
    /// The chain with the targets its circuit breakers hold open moved
    /// after the others ([`crate::breaker`]).
    fn order_by_health(&mut self, host: &Host) {
        let names: Vec<(&str, &str)> = self
            .targets
            .iter()
            .map(|t| (t.provider, t.model.as_str()))
            .collect();
        let order = host
            .breakers()
            .order(&names, host.effects().clock.now().into_std());
        if order.iter().enumerate().all(|(i, &j)| i == j) {
            return;
        }
        let mut targets: Vec<Option<Target<'h>>> = self.targets.drain(..).map(Some).collect();
        let mut providers: Vec<_> = self.providers.drain(..).map(Some).collect();
        for i in order {
            self.targets.extend(targets[i].take());
            self.providers.extend(providers[i].take());
        }
    }

    /// Adds the target `provider`, asked for `model` (its own when `None`).
    fn push(
        &mut self,
        (name, provider): (&'h str, &'h std::sync::Arc<dyn Provider>),
        model: Option<&str>,
    ) {
        self.targets.push(Target {
            provider: name,
            model: model.unwrap_or(provider.default_model()).to_owned(),
            native: provider.supports_native(),
        });
        self.providers.push((name, provider.as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelRoute;
    use crate::mock::{MockProvider, MockScript};
    use callai_wire::{RetryField, StructuredOutput};
    use std::sync::Arc;

    fn host(routes: &[(&str, &[&str])], allowed: Option<&[&str]>) -> Result<Host, ConfigError> {
        let mut config = HostConfig::default();
        for (name, targets) in routes {
            let route = ModelRoute {
                targets: targets.iter().map(|&t| t.to_owned()).collect(),
                weights: None,
                kind: Default::default(),
            };
            config.models.insert((*name).to_owned(), route);
        }
        config.policy.allowed_providers =
            allowed.map(|a| a.iter().map(|&p| p.to_owned()).collect());
        let mock = || {
            Arc::new(MockProvider::new(
                MockScript::default(),
                StructuredOutput::Prompt,
            ))
        };
        Host::builder(config)
            .provider("a", mock())
            .provider("b", mock())
            .build()
    }

    /// A request of one message with the fields `more` (JSON members).
    fn request(more: &str) -> CallRequest {
        let json = format!(r#"{{"messages": [{{"role": "user", "content": "hi"}}], {more}}}"#);
        CallRequest::from_json(&json, RetryField::Honoured).unwrap()
    }

    fn targets(chain: &Chain<'_>) -> Vec<(String, String)> {
        chain
            .targets
            .iter()
            .map(|t| (t.provider.to_owned(), t.model.clone()))
            .collect()
    }

    #[test]
    fn a_route_to_a_provider_the_host_lacks_is_refused_at_start_up() {
        let err = host(&[("fast", &["a", "c/x"])], None).unwrap_err();
        assert_eq!(err.key(), Some("models.fast.targets[1]"), "{err}");
        assert!(err.to_string().contains("\"c\""), "{err}");
    }

    #[test]
    fn a_model_name_routes_only_when_no_provider_is_named() {
        let host = host(&[("fast", &["b/big", "a"])], None).unwrap();
        let routed = host.chain(&request(r#""model": "fast""#)).unwrap();
        assert_eq!(routed.route, Some("fast"));
        let mock_model = host
            .providers()
            .get("a")
            .unwrap()
            .1
            .default_model()
            .to_owned();
        assert_eq!(
            targets(&routed),
            [("b".into(), "big".into()), ("a".into(), mock_model)]
        );
        // Named with its provider, the same name is that provider's model.
        let named = host
            .chain(&request(r#""provider": "a", "model": "fast""#))
            .unwrap();
        assert_eq!(
            (named.route, targets(&named)),
            (None, vec![("a".into(), "fast".into())])
        );
        // A name no route holds goes to the default provider, as before.
        let other = host.chain(&request(r#""model": "slow""#)).unwrap();
        assert_eq!(targets(&other), [("mock".into(), "slow".into())]);
    }

    #[test]
    fn a_family_routes_every_name_it_starts_with_the_longest_first() {
        let host = host(
            &[
                ("gpt-4o*", &["a", "b/pinned"]),
                ("gpt-4o-mini*", &["b"]),
                ("gpt-4o-x", &["a"]),
            ],
            None,
        )
        .unwrap();
        let chain = host
            .chain(&request(r#""model": "gpt-4o-2024-08-06""#))
            .unwrap();
        assert_eq!(chain.route, Some("gpt-4o*"));
        assert_eq!(
            targets(&chain),
            [
                ("a".into(), "gpt-4o-2024-08-06".into()),
                ("b".into(), "pinned".into())
            ],
            "a target without a model is asked for the name sent"
        );
        let mini = host.chain(&request(r#""model": "gpt-4o-mini-1""#)).unwrap();
        assert_eq!(mini.route, Some("gpt-4o-mini*"), "the longest family");
        let exact = host.chain(&request(r#""model": "gpt-4o-x""#)).unwrap();
        assert_eq!(exact.route, Some("gpt-4o-x"), "an entry of its own first");
        let other = host.chain(&request(r#""model": "o3""#)).unwrap();
        assert_eq!(other.route, None);
        let bad = host_config_error("[models.\"gpt*4o\"]\ntargets = [\"a\"]\n");
        assert!(bad.contains("may only end a name"), "{bad}");
    }

    fn host_config_error(toml: &str) -> String {
        HostConfig::from_toml(toml).unwrap_err().to_string()
    }

    #[test]
    fn the_policy_narrows_a_chain_and_refuses_one_it_empties() {
        let host = host(&[("fast", &["b", "a"]), ("only-b", &["b"])], None)
            .unwrap()
            .narrowed_to(&["a".into()]);
        let chain = host.chain(&request(r#""model": "fast""#)).unwrap();
        assert_eq!(chain.targets.len(), 1);
        assert_eq!(chain.targets[0].provider, "a");
        let Err(e) = host.chain(&request(r#""model": "only-b""#)) else {
            panic!("refused")
        };
        assert_eq!(e.code, ErrorCode::PolicyDenied);
        assert_eq!(e.details.unwrap()["model"], "only-b");
        assert_eq!(host.routed_models(), [("fast", ModelKind::Chat)]);
    }
}

//! `[models.NAME]`: a model name clients send, routed to one or more
//! `PROVIDER/MODEL` targets. A list is a fallback chain, tried in order when
//! a target is unavailable; optional weights pick the first target.

use super::{ConfigError, in_range, invalid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most targets a route may have: a chain never exceeds the host's
/// ceiling on requests per call (`retry.maxRetryAttempts`, at most 16).
pub const MAX_TARGETS: usize = 16;

/// `[models.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelRoute {
    /// `PROVIDER/MODEL` or `PROVIDER` (its configured model), in order.
    pub targets: Vec<String>,
    /// One weight per target: the first target of a call is drawn by
    /// weight, the rest follow in order. Unset: always the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<u32>>,
    /// What the name is a model of: completions (the default), or
    /// embeddings, which `/v1/models` says and a completion is refused.
    #[serde(default, skip_serializing_if = "ModelKind::is_chat")]
    pub kind: ModelKind,
}

/// `[models.NAME] kind`: what a routed name is a model of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Completions (chat, messages, responses, `ctx.callAI`).
    #[default]
    Chat,
    /// Embeddings (`/v1/embeddings`).
    Embedding,
}

impl ModelKind {
    /// Whether it is the default, completions.
    pub fn is_chat(&self) -> bool {
        *self == Self::Chat
    }

    /// Its name in the config and in `/v1/models`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embedding => "embedding",
        }
    }
}

/// One target of a route, as its config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetName<'a> {
    /// The provider.
    pub provider: &'a str,
    /// The model, when the target names one (else the provider's own).
    pub model: Option<&'a str>,
}

impl<'a> TargetName<'a> {
    /// `PROVIDER/MODEL` (the model may itself hold `/`) or `PROVIDER`.
    pub fn parse(target: &'a str) -> Self {
        match target.split_once('/') {
            Some((provider, model)) => Self {
                provider,
                model: Some(model),
            },
            None => Self {
                provider: target,
                model: None,
            },
        }
    }
}

/// The route of model name `name` in `models`: its own entry, else the
/// longest family (`[models."gpt-4o*"]`, a name ending in `*`) it starts
/// with; its key with it.
pub fn route_of<'m>(
    models: &'m BTreeMap<String, ModelRoute>,
    name: &str,
) -> Option<(&'m str, &'m ModelRoute)> {
    if let Some((key, route)) = models.get_key_value(name) {
        return Some((key, route));
    }
    models
        .iter()
        .filter_map(|(key, route)| Some((key, key.strip_suffix('*')?, route)))
        .filter(|(_, prefix, _)| name.starts_with(prefix))
        .max_by_key(|(_, prefix, _)| prefix.len())
        .map(|(key, _, route)| (key.as_str(), route))
}

/// Whether `key` names a family of models (`gpt-4o*`): a target that names
/// no model asks each for the name the call sent.
pub fn is_family(key: &str) -> bool {
    key.ends_with('*')
}

impl ModelRoute {
    /// The targets, parsed.
    pub fn target_names(&self) -> impl Iterator<Item = TargetName<'_>> {
        self.targets.iter().map(|t| TargetName::parse(t))
    }

    /// The order of one call's targets: the first drawn by weight with
    /// `draw` (in `[0, 1)`), then every other in the configured order.
    pub fn order(&self, draw: f64) -> Vec<usize> {
        let first = self.weights.as_ref().map_or(0, |w| pick(w, draw));
        std::iter::once(first)
            .chain((0..self.targets.len()).filter(|&i| i != first))
            .collect()
    }

    /// Checks the route named `name` on its own (that each provider exists
    /// is checked when the host is built).
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let key = format!("models.{name}");
        if name.is_empty() {
            return Err(invalid("models", "a model name may not be empty".into()));
        }
        if name.trim_end_matches('*').contains('*') || name.ends_with("**") {
            return Err(invalid(
                &key,
                format!(
                    "{name:?}: a '*' may only end a name, for a family of models (\"gpt-4o*\")"
                ),
            ));
        }
        in_range(
            &format!("{key}.targets"),
            self.targets.len() as u64,
            1,
            MAX_TARGETS as u64,
        )?;
        for (i, target) in self.targets.iter().enumerate() {
            let parsed = TargetName::parse(target);
            if parsed.provider.is_empty() || parsed.model.is_some_and(str::is_empty) {
                return Err(invalid(
                    &format!("{key}.targets[{i}]"),
                    format!("{target:?} is not PROVIDER/MODEL or PROVIDER"),
                ));
            }
            if self.targets[..i].contains(target) {
                return Err(invalid(
                    &format!("{key}.targets[{i}]"),
                    format!("{target:?} is listed twice"),
                ));
            }
        }
        if let Some(weights) = &self.weights {
            if weights.len() != self.targets.len() {
                return Err(invalid(
                    &format!("{key}.weights"),
                    format!(
                        "has {} weights for {} targets: give one per target",
                        weights.len(),
                        self.targets.len()
                    ),
                ));
            }
            if weights.iter().all(|&w| w == 0) {
                return Err(invalid(
                    &format!("{key}.weights"),
                    "every weight is 0: at least one must be positive".into(),
                ));
            }
        }
        Ok(())
    }
}

/// The index `draw` (in `[0, 1)`) falls on when each index takes a share
/// of `[0, 1)` proportional to its weight.
fn pick(weights: &[u32], draw: f64) -> usize {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let mut point = draw.clamp(0.0, 1.0) * total as f64;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0 && point < f64::from(w) {
            return i;
        }
        point -= f64::from(w);
    }
    // `draw` at (or rounding up to) 1: the last target with any weight.
    weights.iter().rposition(|&w| w > 0).unwrap_or(0)
}

/// Checks every route of `[models]`.
pub fn validate_all(models: &BTreeMap<String, ModelRoute>) -> Result<(), ConfigError> {
    models
        .iter()
        .try_for_each(|(name, route)| route.validate(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(targets: &[&str], weights: Option<Vec<u32>>) -> ModelRoute {
        ModelRoute {
            kind: ModelKind::Chat,
            targets: targets.iter().map(|&t| t.to_owned()).collect(),
            weights,
        }
    }

    #[test]
    fn targets_name_a_provider_and_maybe_a_model() {
        let r = route(&["openai/gpt-4o-mini", "local", "or/meta/llama-3"], None);
        let names: Vec<_> = r.target_names().collect();
        assert_eq!(names[0].provider, "openai");
        assert_eq!(names[0].model, Some("gpt-4o-mini"));
        assert_eq!((names[1].provider, names[1].model), ("local", None));
        assert_eq!(
            names[2].model,
            Some("meta/llama-3"),
            "the model keeps its own '/'"
        );
    }

    #[test]
    fn without_weights_the_chain_is_the_configured_order() {
        let r = route(&["a", "b", "c"], None);
        assert_eq!(r.order(0.99), [0, 1, 2]);
    }

    #[test]
    fn weights_pick_the_first_and_the_rest_follow_in_order() {
        let r = route(&["a", "b", "c"], Some(vec![3, 1, 0]));
        assert_eq!(r.order(0.0), [0, 1, 2]);
        assert_eq!(r.order(0.74), [0, 1, 2]);
        assert_eq!(r.order(0.75), [1, 0, 2]);
        assert_eq!(r.order(0.999_999), [1, 0, 2]);
        assert_eq!(r.order(1.0), [1, 0, 2], "a weight of 0 is never drawn");
        // Shares over many evenly spread draws are the weights' shares.
        let firsts = (0..1000).map(|i| r.order(f64::from(i) / 1000.0)[0]);
        let b = firsts.filter(|&f| f == 1).count();
        assert_eq!(b, 250);
    }

    #[test]
    fn a_bad_route_is_refused_naming_its_key() {
        let cases = [
            (route(&[], None), "models.m.targets", "must be 1..16"),
            (
                route(&["a/"], None),
                "models.m.targets[0]",
                "not PROVIDER/MODEL",
            ),
            (
                route(&["a", "a"], None),
                "models.m.targets[1]",
                "listed twice",
            ),
            (
                route(&["a", "b"], Some(vec![1])),
                "models.m.weights",
                "one per target",
            ),
            (
                route(&["a"], Some(vec![0])),
                "models.m.weights",
                "every weight is 0",
            ),
        ];
        for (r, key, message) in cases {
            let err = r.validate("m").unwrap_err();
            assert_eq!(err.key(), Some(key), "{err}");
            assert!(err.to_string().contains(message), "{err}");
        }
        assert!(route(&["a/x", "b"], Some(vec![0, 2])).validate("m").is_ok());
    }
}

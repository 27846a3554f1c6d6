//! Cost in money: each request priced at its own provider and model, from
//! the provider's `[providers.NAME.prices]` or the `[pricing] file` in
//! LiteLLM's `model_prices_and_context_window.json` format. How a request
//! is priced (and a call's requests summed) is the engine's rule
//! (`callai_engine::cost`), which budgets in money charge by too.

use crate::Config;
use callai_engine::config::{ConfigError, invalid};
use callai_engine::cost::{PerToken, PriceBook, TokenPrice as Price};
use callai_gateway::config::MAX_PRICE_FILE_BYTES;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The prices a host knows: by provider, and by model from the price list.
#[derive(Debug, Default)]
pub struct PriceList {
    by_provider: HashMap<String, Price>,
    /// The list's entries by their whole name (`gpt-4o-mini`,
    /// `azure/gpt-4o-mini`).
    by_model: HashMap<String, Price>,
    /// Its entries named `PROVIDER/MODEL`, by provider then model, split at
    /// each `/` (so `a/b/m` is under `a` as `b/m` and under `a/b` as `m`):
    /// the lookup of a request's `provider/model` builds no string.
    by_provider_model: HashMap<String, HashMap<String, Price>>,
}

impl PriceList {
    /// The prices of `config`: each provider's `prices`, and the `[pricing]
    /// file`, read now (an unreadable or empty one is refused naming
    /// `pricing.file`).
    pub fn load(config: &Config) -> Result<Self, ConfigError> {
        let by_provider = config
            .providers
            .iter()
            .filter_map(|(name, section)| {
                let p = section.prices.as_ref()?;
                let price = Price {
                    input: PerToken::per_million(p.input),
                    cached_input: PerToken::per_million(p.cached_input.unwrap_or(p.input)),
                    cache_write: PerToken::per_million(p.cache_write.unwrap_or(p.input)),
                    output: PerToken::per_million(p.output),
                    currency: p.currency.clone().into(),
                };
                Some((name.clone(), price))
            })
            .collect();
        let by_model = match &config.pricing.file {
            None => HashMap::new(),
            Some(path) => {
                let bad =
                    |why: String| invalid("pricing.file", format!("{}: {why}", path.display()));
                let text = read_bounded(path).map_err(bad)?;
                let list: Map<String, Value> = serde_json::from_str(&text)
                    .map_err(|e| bad(format!("not a JSON object of models: {e}")))?;
                let prices = litellm_prices(&list);
                let bound = config.pricing.max_per_million;
                let over = prices.iter().find_map(|(model, p)| {
                    let per_million = p.dearest_input().max(p.output).per_million_f64();
                    (per_million > bound).then_some((model, per_million))
                });
                if let Some((model, per_million)) = over {
                    return Err(bad(format!(
                        "model {model:?} costs {per_million} per million tokens, over \
                         pricing.maxPerMillion ({bound}): a price this large is taken for a \
                         mistake (raise the bound if it is not)"
                    )));
                }
                if prices.is_empty() {
                    return Err(bad(
                        "names no model with input_cost_per_token and output_cost_per_token".into(),
                    ));
                }
                prices
            }
        };
        let list = Self::of(by_provider, by_model);
        crate::money::check_money(config, &list)?;
        Ok(list)
    }

    /// The list of the providers' own prices and the price list's entries.
    fn of(by_provider: HashMap<String, Price>, by_model: HashMap<String, Price>) -> Self {
        let mut by_provider_model: HashMap<String, HashMap<String, Price>> = HashMap::new();
        for (name, price) in &by_model {
            for (at, _) in name.match_indices('/') {
                let (provider, model) = (&name[..at], &name[at + 1..]);
                by_provider_model
                    .entry(provider.to_owned())
                    .or_default()
                    .insert(model.to_owned(), price.clone());
            }
        }
        Self {
            by_provider,
            by_model,
            by_provider_model,
        }
    }

    /// The price of a request to `model` of `provider`: the provider's own,
    /// else the list's `provider/model`, else its `model`.
    pub fn price(&self, provider: &str, model: &str) -> Option<&Price> {
        self.by_provider
            .get(provider)
            .or_else(|| self.by_provider_model.get(provider)?.get(model))
            .or_else(|| self.by_model.get(model))
    }

    /// Whether some request to `provider` may have a price in `currency`:
    /// its own, or an entry of the list (by `provider/model`, or by a model
    /// name any provider may be asked for).
    pub(crate) fn may_price(&self, provider: &str, currency: &str) -> bool {
        let in_currency = |p: &Price| &*p.currency == currency;
        self.by_provider.get(provider).is_some_and(in_currency)
            || self
                .by_provider_model
                .get(provider)
                .is_some_and(|models| models.values().any(in_currency))
            || self.by_model.values().any(in_currency)
    }
}

/// The text of the price list at `path`, read up to
/// [`MAX_PRICE_FILE_BYTES`] and no further (a file past it, or one that
/// never ends, such as `/dev/zero`, is refused, not read until memory runs
/// out).
fn read_bounded(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    file.take(MAX_PRICE_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_PRICE_FILE_BYTES {
        return Err(format!(
            "over {} MiB; a price list is read up to that size",
            MAX_PRICE_FILE_BYTES >> 20
        ));
    }
    String::from_utf8(text).map_err(|e| format!("not UTF-8 text: {e}"))
}

/// The entries of a LiteLLM price list that price tokens: both costs per
/// token numbers of 0 or more. Others (its `sample_spec`, image or audio
/// models priced otherwise) are left out.
fn litellm_prices(list: &Map<String, Value>) -> HashMap<String, Price> {
    let cost = |entry: &Value, key: &str| {
        entry
            .get(key)
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0)
    };
    list.iter()
        .filter_map(|(model, entry)| {
            let input = cost(entry, "input_cost_per_token")?;
            let price = Price {
                input: PerToken::each(input),
                cached_input: PerToken::each(
                    cost(entry, "cache_read_input_token_cost").unwrap_or(input),
                ),
                cache_write: PerToken::each(
                    cost(entry, "cache_creation_input_token_cost").unwrap_or(input),
                ),
                output: PerToken::each(cost(entry, "output_cost_per_token")?),
                currency: "USD".into(),
            };
            Some((model.clone(), price))
        })
        .collect()
}

impl PriceBook for PriceList {
    fn price(&self, provider: &str, model: &str) -> Option<&Price> {
        PriceList::price(self, provider, model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_litellm_list_prices_tokens_and_leaves_the_rest_out() {
        let list = json!({
            "sample_spec": {"input_cost_per_token": "cost per token", "output_cost_per_token": 0},
            "gpt-4o-mini": {"input_cost_per_token": 1.5e-7, "output_cost_per_token": 6e-7,
                            "cache_read_input_token_cost": 7.5e-8,
                            "litellm_provider": "openai", "mode": "chat"},
            "dall-e-3": {"output_cost_per_image": 0.04},
            "azure/gpt-4o-mini": {"input_cost_per_token": 1.65e-7, "output_cost_per_token": 6.6e-7}
        });
        let prices = litellm_prices(list.as_object().unwrap());
        assert_eq!(prices.len(), 2);
        let list = PriceList::of(HashMap::new(), prices);
        let openai = list.price("openai", "gpt-4o-mini").unwrap();
        assert_eq!(
            (openai.input, openai.cached_input),
            (PerToken::each(1.5e-7), PerToken::each(7.5e-8))
        );
        assert_eq!(
            openai.input,
            PerToken(150_000_000),
            "0.15 per million, exactly"
        );
        // A provider/model entry wins over the bare model.
        assert_eq!(
            list.price("azure", "gpt-4o-mini").unwrap().input,
            PerToken::per_million(0.165)
        );
        assert!(list.price("openai", "o3").is_none());
        // A provider or model name with a slash of its own.
        let slashed = json!({"openrouter/meta-llama/llama-3": {"input_cost_per_token": 1e-7,
                                                               "output_cost_per_token": 2e-7}});
        let list = PriceList::of(HashMap::new(), litellm_prices(slashed.as_object().unwrap()));
        assert!(list.price("openrouter", "meta-llama/llama-3").is_some());
        assert!(list.price("openrouter/meta-llama", "llama-3").is_some());
        assert!(list.price("openrouter", "llama-3").is_none());
    }
}

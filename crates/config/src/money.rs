//! What a budget in money needs of the prices, checked at start-up: a call
//! that may reach a target with no price in its budget's currency is
//! refused before any request (`budget_unpriced`), so a config under which
//! every such call of a tenant would be refused is refused itself, naming
//! the key, rather than served. Cases where only some calls would be
//! refused are notes ([`money_notes`]), not refusals.

use crate::{Config, PriceList};
use callai_engine::config::{ConfigError, TargetName, invalid};
use callai_gateway::config::TenantConfig;

/// A tenant with a budget in money, its currency.
fn in_money(config: &Config) -> impl Iterator<Item = (&str, &TenantConfig, &str)> {
    config
        .tenants
        .iter()
        .filter(|(_, t)| t.budget.cost.is_some())
        .map(|(name, t)| (name.as_str(), t, t.budget.currency.as_str()))
}

/// Whether `tenant`'s calls may reach `provider` (its own list within the
/// host's policy).
fn reaches(config: &Config, tenant: &TenantConfig, provider: &str) -> bool {
    config.host.provider_allowed(provider)
        && tenant
            .allowed_providers
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|p| p == provider))
}

/// The model a route's target asks for: its own, else its provider's.
fn model_of(config: &Config, target: TargetName<'_>) -> Option<String> {
    match target.model {
        Some(model) => Some(model.to_owned()),
        None => config
            .providers
            .get(target.provider)
            .and_then(|section| section.settings(target.provider).ok())
            .map(|settings| settings.model),
    }
}

/// Whether a request to `provider`'s `model` has a price in `currency`.
fn priced(prices: &PriceList, provider: &str, model: Option<&str>, currency: &str) -> bool {
    model
        .and_then(|model| prices.price(provider, model))
        .is_some_and(|p| &*p.currency == currency)
}

/// Refuses what would fail every call of a tenant budgeted in money: a
/// provider its `allowedProviders` names that nothing prices in its
/// currency, and a route all of whose targets it may reach lack a price.
pub(crate) fn check_money(config: &Config, prices: &PriceList) -> Result<(), ConfigError> {
    for (name, tenant, currency) in in_money(config) {
        for (i, provider) in tenant.allowed_providers.iter().flatten().enumerate() {
            if !prices.may_price(provider, currency) {
                return Err(invalid(
                    &format!("tenants.{name}.allowedProviders[{i}]"),
                    format!(
                        "provider {provider:?} has no price in {currency}, and the tenant's budget \
                         is in money: every call of it to {provider:?} would be refused \
                         (budget_unpriced); give it [providers.{provider}.prices] in {currency} or \
                         a [pricing] file entry, or leave it out"
                    ),
                ));
            }
        }
        for (route, section) in &config.host.models {
            let reachable: Vec<_> = section
                .targets
                .iter()
                .map(|t| TargetName::parse(t))
                .filter(|t| reaches(config, tenant, t.provider))
                .collect();
            let none_priced = reachable.iter().all(|&t| {
                let model = model_of(config, t);
                !priced(prices, t.provider, model.as_deref(), currency)
            });
            if !reachable.is_empty() && none_priced {
                return Err(invalid(
                    &format!("models.{route}.targets"),
                    format!(
                        "no target tenant {name:?} may reach has a price in {currency}, and its \
                         budget is in money: every call of it to model {route:?} would be refused \
                         (budget_unpriced); price a target ([providers.NAME.prices] or the \
                         [pricing] file)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What `config check` notes about money: a route some of whose targets a
/// tenant budgeted in money may reach lack a price, so the tenant's calls
/// to it are refused (its priced targets alone would not be reached).
pub fn money_notes(config: &Config, prices: &PriceList) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, tenant, currency) in in_money(config) {
        for (route, section) in &config.host.models {
            let unpriced: Vec<&str> = section
                .targets
                .iter()
                .filter(|t| {
                    let target = TargetName::parse(t);
                    let model = model_of(config, target);
                    reaches(config, tenant, target.provider)
                        && !priced(prices, target.provider, model.as_deref(), currency)
                })
                .map(String::as_str)
                .collect();
            if !unpriced.is_empty() {
                notes.push(format!(
                    "models.{route} has targets with no price in {currency} ({}): tenant {name:?}'s \
                     budget is in money, so its calls to model {route:?} are refused \
                     (budget_unpriced)",
                    unpriced.join(", ")
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::money_notes;
    use crate::{Config, PriceList};

    const PROVIDERS: &str = "[providers.p]\nkind = \"openai\"\nmodel = \"m\"\nprices = { input = 1.0, output = 2.0 }\n\
         [providers.q]\nkind = \"openai\"\nmodel = \"m\"\n";

    fn loaded(more: &str) -> Result<(Config, PriceList), String> {
        let config = Config::from_toml(&format!("{PROVIDERS}{more}")).map_err(|e| e.to_string())?;
        let prices = PriceList::load(&config).map_err(|e| e.to_string())?;
        Ok((config, prices))
    }

    const MONEY: &str = "[tenants.a]\ntokenEnv = \"A\"\n[tenants.a.budget]\ncost = 1.0\n";

    #[test]
    fn an_allowed_provider_with_no_price_is_refused_under_money() {
        let e = loaded(&MONEY.replace(
            "tokenEnv = \"A\"\n",
            "tokenEnv = \"A\"\nallowedProviders = [\"p\", \"q\"]\n",
        ))
        .unwrap_err();
        assert!(e.contains("tenants.a.allowedProviders[1]"), "{e}");
        assert!(e.contains("\"q\" has no price in USD"), "{e}");
        // In another currency, p's USD price is no price either.
        let e = loaded(
            &MONEY
                .replace(
                    "tokenEnv = \"A\"\n",
                    "tokenEnv = \"A\"\nallowedProviders = [\"p\"]\n",
                )
                .replace("cost = 1.0\n", "cost = 1.0\ncurrency = \"EUR\"\n"),
        )
        .unwrap_err();
        assert!(
            e.contains("allowedProviders[0]") && e.contains("in EUR"),
            "{e}"
        );
        // Without a budget in money, nothing is asked of prices.
        loaded("[tenants.a]\ntokenEnv = \"A\"\nallowedProviders = [\"q\"]\n").unwrap();
    }

    #[test]
    fn a_route_with_no_priced_target_is_refused_and_a_partly_priced_one_noted() {
        let e = loaded(&format!(
            "[models.free]\ntargets = [\"q\", \"q/other\"]\n{MONEY}"
        ))
        .unwrap_err();
        assert!(e.contains("models.free.targets"), "{e}");
        assert!(e.contains("tenant \"a\""), "{e}");
        // A tenant that may not reach q has no call to it to refuse.
        loaded(&format!(
            "[models.free]\ntargets = [\"q\", \"p\"]\n{}",
            MONEY.replace(
                "tokenEnv = \"A\"\n",
                "tokenEnv = \"A\"\nallowedProviders = [\"p\"]\n"
            )
        ))
        .unwrap();
        let (config, prices) = loaded(&format!(
            "[models.open]\ntargets = [\"p/m\", \"q/m\"]\n{MONEY}"
        ))
        .unwrap();
        let notes = money_notes(&config, &prices);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("models.open") && notes[0].contains("q/m"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_currency_in_the_wrong_case_is_refused_where_it_is_written() {
        let e =
            loaded(&MONEY.replace("cost = 1.0\n", "cost = 1.0\ncurrency = \"usd\"\n")).unwrap_err();
        assert!(
            e.contains("tenants.a.budget.currency") && e.contains("\"usd\""),
            "{e}"
        );
        let e = Config::from_toml(
            "[providers.p]\nkind = \"openai\"\nprices = { input = 1.0, output = 2.0, currency = \"usd\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("providers.p.prices.currency"), "{e}");
    }
}

//! `callai config check FILE`: a host config checked as start-up checks
//! it, without starting anything; the settings a host would run with,
//! printed as TOML with every default filled in.

use crate::error::{CliError, print};
use callai_config::{Config, PriceList, located_in_file, money_notes};
use std::path::Path;
use std::process::ExitCode;

/// Checks `file`; prints the resolved config on stdout and, on stderr,
/// what the config needs from the environment that this one lacks (with
/// `json`, both in one JSON object on stdout). Exits 2 naming the key, line
/// and column of the first error.
pub fn check(file: &Path, json: bool) -> Result<ExitCode, CliError> {
    let config = Config::from_file(file)?;
    // Every variable as set (each to a value of its own, so that two keys
    // naming one variable still share a token): what is checked here is
    // the file; what this environment lacks is said below.
    let present = |name: &str| Some(format!("{name} is set"));
    callai_server::check_config(&config, &present).map_err(|e| located_in_file(e, file))?;
    let prices = PriceList::load(&config).map_err(|e| located_in_file(e, file))?;
    let resolved = config.resolved()?;
    let notes = notes(&config, &prices, &|name| std::env::var(name).ok());
    if json {
        let settings = serde_json::to_value(&resolved)
            .map_err(|e| CliError::Usage(format!("cannot print the config: {e}")))?;
        let said = serde_json::json!({
            "file": file.display().to_string(),
            "valid": true,
            "settings": settings,
            "notes": notes,
        });
        print(&format!("{said}\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let settings = toml::to_string(&resolved)
        .map_err(|e| CliError::Usage(format!("cannot print the config: {e}")))?;
    print(&format!(
        "# {}: valid. Every setting a host reads from it, defaults filled in.\n{settings}",
        file.display()
    ))?;
    for note in notes {
        eprintln!("note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What an operator should know before `callai serve --config FILE` here:
/// variables it names that `env` lacks, and choices with consequences.
fn notes(config: &Config, prices: &PriceList, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, name) in config.variables() {
        if env(&name).is_none_or(|v| v.trim().is_empty()) {
            out.push(format!(
                "{key} names ${name}, which is not set here; a host started here with this \
                 config stops, naming it"
            ));
        }
    }
    if config.providers.is_empty() {
        out.push(
            "no [providers.NAME]: only the built-in mock answers, without calling a model".into(),
        );
    }
    if config.server.token_env.is_empty() && config.tenants.is_empty() {
        out.push(
            "no token is set ([server] tokenEnv, [tenants.NAME]): whoever reaches the server is \
             its admin; it listens on loopback only"
                .into(),
        );
    }
    let budgeted = config.tenants.iter().find_map(|(name, t)| {
        let key = match (t.budget.is_limited(), t.limits.is_empty()) {
            (true, _) => "budget",
            (false, false) => "limits",
            (false, true) => return None,
        };
        Some(format!("tenants.{name}.{key}"))
    });
    if let Some(key) = budgeted
        && config.runlog.url.is_empty()
    {
        out.push(format!(
            "{key} is kept in the run log, and [runlog] url is not set: `callai serve` needs \
             --runlog"
        ));
    }
    out.extend(money_notes(config, prices));
    out
}

#[cfg(test)]
mod tests {
    use super::notes;
    use callai_config::{Config, PriceList};

    #[test]
    fn unset_variables_and_open_servers_are_noted() {
        let config = Config::from_toml(
            "[providers.openai]\n[tenants.a]\ntokenEnv = \"A_TOKEN\"\n[tenants.a.budget]\nrequests = 5\n",
        )
        .unwrap();
        let prices = PriceList::load(&config).unwrap();
        let text = notes(&config, &prices, &|name| {
            (name == "A_TOKEN").then(|| "t".into())
        })
        .join("\n");
        assert!(
            text.contains("providers.openai.apiKeyEnv names $OPENAI_API_KEY"),
            "{text}"
        );
        assert!(!text.contains("A_TOKEN"), "{text}");
        assert!(text.contains("needs --runlog"), "{text}");
        let open = notes(&Config::default(), &PriceList::default(), &|_| None).join("\n");
        assert!(open.contains("only the built-in mock"), "{open}");
        assert!(open.contains("no token is set"), "{open}");
    }
}

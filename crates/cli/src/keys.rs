//! `callai keys create|list|revoke`: the API keys of a running `callai
//! serve`, through its `/v1/keys` with the admin's token (read from a
//! variable, never an argument a process list shows).

use crate::args::{KeysCommand, ServerArgs};
use crate::error::CliError;
use serde_json::{Map, Value, json};
use std::process::ExitCode;

/// Runs a `callai keys` command.
pub fn keys(command: KeysCommand) -> Result<ExitCode, CliError> {
    let rt = crate::run::tokio()?;
    match command {
        KeysCommand::Create {
            tenant,
            name,
            limits,
            allowed_providers,
            allowed_models,
            expires_at,
            server,
        } => {
            let mut body = json!({"tenant": tenant, "name": name});
            let limits = limits
                .iter()
                .map(|l| limit(l))
                .collect::<Result<Vec<_>, _>>()?;
            body["limits"] = Value::from(limits);
            if !allowed_providers.is_empty() {
                body["allowedProviders"] = json!(allowed_providers);
            }
            if !allowed_models.is_empty() {
                body["allowedModels"] = json!(allowed_models);
            }
            if let Some(at) = expires_at {
                body["expiresAt"] = Value::from(at);
            }
            let made = rt.block_on(send(&server, reqwest::Method::POST, "/v1/keys", Some(body)))?;
            crate::error::print(&format!("{made:#}\n"))?;
        }
        KeysCommand::List { json, server } => {
            let list = rt.block_on(send(&server, reqwest::Method::GET, "/v1/keys", None))?;
            let text = match json {
                true => format!("{list:#}\n"),
                false => table(&list),
            };
            crate::error::print(&text)?;
        }
        KeysCommand::Revoke { id, server } => {
            let path = format!("/v1/keys/{id}");
            let key = rt.block_on(send(&server, reqwest::Method::DELETE, &path, None))?;
            crate::error::print(&format!(
                "{} {}\n",
                key["id"].as_str().unwrap_or(&id),
                key["status"].as_str().unwrap_or("?")
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `KEY=AMOUNT/PER` as a limit (`requests=600/1m`).
fn limit(text: &str) -> Result<Value, CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--limit {text:?}: write KEY=AMOUNT/PER, as requests=600/1m or cost=5/1d"
        ))
    };
    let (key, rest) = text.split_once('=').ok_or_else(bad)?;
    let (amount, per) = rest.split_once('/').ok_or_else(bad)?;
    let amount: f64 = amount.trim().parse().map_err(|_| bad())?;
    let amount = match key {
        "cost" => Value::from(amount),
        "requests" | "inputTokens" | "outputTokens" if amount.fract() == 0.0 && amount >= 0.0 => {
            Value::from(amount as u64)
        }
        _ => return Err(bad()),
    };
    let mut limit = Map::new();
    limit.insert(key.to_owned(), amount);
    limit.insert("per".into(), Value::from(per.trim()));
    Ok(limit.into())
}

/// Sends `method path` (with `body`) to the server as the admin; its JSON
/// answer, or its error's message.
async fn send(
    server: &ServerArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, CliError> {
    let token = std::env::var(&server.token_env)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "callai keys: the variable {} holds no token (the admin's, [server] tokenEnv's; \
                 --token-env names another)",
                server.token_env
            ))
        })?;
    // reqwest is built without a bundled crypto provider; use ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| CliError::Server(format!("cannot build an HTTP client: {e}")))?;
    let url = format!("{}{path}", server.url.trim_end_matches('/'));
    let mut request = client.request(method, &url).bearer_auth(token.trim());
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request
        .send()
        .await
        .map_err(|e| CliError::Server(format!("cannot reach {url}: {e}")))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| CliError::Server(format!("{url}: the answer was cut: {e}")))?;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        let said = answer
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map_or_else(|| answer.to_string(), str::to_owned);
        return Err(CliError::Server(format!("{url}: {status}: {said}")));
    }
    Ok(answer)
}

/// `GET /v1/keys` as a table for people.
fn table(list: &Value) -> String {
    let mut out = format!(
        "{:<22} {:<16} {:<20} {:<8} {}\n",
        "ID", "TENANT", "NAME", "STATUS", "LAST USED"
    );
    for key in list["data"].as_array().into_iter().flatten() {
        let field = |k: &str| key[k].as_str().unwrap_or("-").to_owned();
        out.push_str(&format!(
            "{:<22} {:<16} {:<20} {:<8} {}\n",
            field("id"),
            field("tenant"),
            field("name"),
            field("status"),
            field("lastUsedAt")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::limit;
    use serde_json::json;

    #[test]
    fn a_limit_is_key_amount_per_window() {
        assert_eq!(
            limit("requests=600/1m").unwrap(),
            json!({"requests": 600, "per": "1m"})
        );
        assert_eq!(
            limit("cost=2.5/1d").unwrap(),
            json!({"cost": 2.5, "per": "1d"})
        );
        for bad in [
            "requests600/1m",
            "requests=600",
            "rpm=5/1m",
            "requests=1.5/1m",
        ] {
            assert!(limit(bad).is_err(), "{bad}");
        }
    }
}

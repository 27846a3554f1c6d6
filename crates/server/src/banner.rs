//! What `callai serve` says when it starts: where it listens, what it may
//! call, who may call it, where runs are kept, in one block an operator
//! reads once (and a newcomer learns from what to change).

use callai_config::Config;
use callai_engine::Host;
use callai_gateway::tenants::Tenants;
use std::fmt::Write;
use std::net::SocketAddr;

/// What the banner is made of, gathered where the server is bound.
pub(crate) struct BannerFacts<'a> {
    pub addr: SocketAddr,
    pub config: &'a Config,
    pub host: &'a Host,
    pub tenants: &'a Tenants,
    /// The run log's URL or file; empty for none.
    pub runlog: &'a str,
    /// Bundled packs, and whether a `--packs` folder was read.
    pub bundled: usize,
    pub packs_dir: Option<&'a std::path::Path>,
}

/// The block: its first line is `listening on http://ADDR` (what scripts
/// wait for), then one line per fact.
pub(crate) fn banner(facts: &BannerFacts<'_>) -> String {
    let mut out = format!("listening on http://{}\n", facts.addr);
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "  {label:<10} {text}");
    };
    line("providers", providers(facts));
    line("callers", callers(facts));
    line(
        "run log",
        match facts.runlog {
            "" => "none: runs are kept in memory and end with the process \
                   (--runlog FILE or [runlog] url keeps them)"
                .to_owned(),
            url => redacted(url),
        },
    );
    let mut packs = format!("{} bundled examples", facts.bundled);
    if let Some(dir) = facts.packs_dir {
        let _ = write!(packs, ", and every *.wasm in {}", dir.display());
    }
    line("packs", format!("{packs}; uploads with PUT /v1/packs/NAME"));
    out
}

fn providers(facts: &BannerFacts<'_>) -> String {
    let default = &facts.host.config().defaults.provider;
    let real: Vec<String> = facts
        .config
        .providers
        .iter()
        .map(|(name, section)| match section.settings(name) {
            Ok(s) => format!(
                "{name} ({} at {}, model {})",
                s.kind.as_str(),
                s.base_url,
                s.model
            ),
            Err(_) => name.clone(),
        })
        .collect();
    if real.is_empty() {
        return "only the built-in mock, which answers without calling any model; \
                add [providers.NAME] to a --config file to call one"
            .into();
    }
    format!(
        "{}, and the built-in mock; default {default}",
        real.join(", ")
    )
}

fn callers(facts: &BannerFacts<'_>) -> String {
    let server = &facts.config.server;
    let tenants: Vec<&str> = facts.tenants.names().collect();
    if facts.tenants.open() {
        let reach = if facts.addr.ip().is_loopback() {
            "this machine"
        } else {
            "this address (--allow-open)"
        };
        return format!(
            "no token is set: whoever reaches {reach} is the admin; \
             set [server] tokenEnv before sharing it"
        );
    }
    let mut text = if server.token_env.is_empty() {
        "no admin token".to_owned()
    } else {
        format!("the admin's token (${})", server.token_env)
    };
    if !tenants.is_empty() {
        let _ = write!(text, "; tenants {}", tenants.join(", "));
    }
    if !server.metrics_token_env.is_empty() {
        let _ = write!(text, "; /metrics also with ${}", server.metrics_token_env);
    }
    text
}

/// `url` without a password (`postgres://user:secret@…`).
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_run_log_password_is_not_printed() {
        assert_eq!(
            redacted("postgres://callai:s3cret@127.0.0.1:5432/runs"),
            "postgres://callai:***@127.0.0.1:5432/runs"
        );
        assert_eq!(
            redacted("/var/lib/callai/runs.db"),
            "/var/lib/callai/runs.db"
        );
    }
}

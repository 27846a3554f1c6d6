//! What a server is built of, from its config and options: the address it
//! binds, and the gateway's parts (the host with its providers, mock and
//! prices; the packs, compiled by a bounded wasmtime runtime; the callers
//! and their tokens; the run log; where spans go). The first error names
//! its key.

use crate::layers::auth;
use crate::options::{EnvSource, ServeError, ServerOptions};
use crate::spans::Exported;
use callai_config::{Config, OpenLog, PriceList, open_runlog, parse_listen};
use callai_engine::{Host, MockProvider, MockScript, RunLog};
use callai_gateway::Parts;
use callai_gateway::packs::PackStore;
use callai_gateway::quotas::QuotaPlan;
use callai_gateway::spans::Spans;
use callai_gateway::tenants::{ServerTokens, Tenants};
use callai_host::PackRuntime;
use callai_telemetry::Telemetry;
use std::net::SocketAddr;
use std::sync::Arc;

/// What [`setup`] makes.
pub(crate) struct Setup {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The gateway's parts.
    pub gateway: Parts,
    /// The OTLP exporter, when spans are sent.
    pub telemetry: Option<Telemetry>,
    /// The run log's URL or file; empty for none.
    pub runlog_url: String,
}

/// The built-in mock as `[mock]` sets it up; each run or call brings its
/// own script.
pub(crate) fn mock(config: &Config) -> MockProvider {
    MockProvider::new(
        MockScript::from_json("[]").expect("an empty script"),
        config.host.mock.structured_output(),
    )
    .with_latency(config.host.mock.latency())
}

/// The packs: the bundled ones and `--packs DIR`'s, compiled by a wasmtime
/// runtime bounded as `[server]` and `[cache]` say.
async fn open_packs(config: &Config, options: &ServerOptions) -> Result<PackStore, ServeError> {
    let mut runtime_options = options.runtime.clone();
    runtime_options.max_function_bytes = Some(config.server.max_pack_function_bytes);
    runtime_options.max_code_bytes = Some(config.server.max_pack_code_bytes);
    runtime_options.cache_max_bytes = config.cache.max_bytes;
    let runtime = PackRuntime::with_options(&runtime_options)
        .map_err(|e| ServeError::Setup(format!("cannot start wasmtime: {e:#}")))?;
    let packs = PackStore::new(
        runtime,
        options.bundled.clone(),
        config.server.max_compiles as usize,
    );
    if let Some(dir) = &options.packs_dir {
        packs.add_dir(dir).await.map_err(ServeError::Setup)?;
    }
    Ok(packs)
}

/// The callers: the admin (with `admin_token`), the metrics scraper and
/// every tenant, their tokens read through `env`; a tenant's budget needs a
/// run log (`has_runlog`).
fn callers(
    config: &Config,
    host: &Host,
    admin_token: Option<&str>,
    env: &EnvSource,
    has_runlog: bool,
) -> Result<Tenants, ServeError> {
    let setup = ServeError::Setup;
    let metrics_token = auth::server_token(
        "server.metricsTokenEnv",
        &config.server.metrics_token_env,
        |k| env(k),
    )
    .map_err(setup)?;
    let tokens = ServerTokens {
        admin: admin_token,
        metrics: metrics_token.as_deref(),
    };
    let tenants = Tenants::new(host, tokens, &config.tenants, &|k| env(k))
        .map_err(|e| setup(e.to_string()))?;
    if let Some(name) = tenants.budgeted().next()
        && !has_runlog
    {
        let section = &config.tenants[name];
        let key = if section.budget.is_limited() {
            "budget"
        } else {
            "limits"
        };
        return Err(setup(format!(
            "tenants.{name}.{key}: budgets and limits are kept in the run log; set [runlog] url \
             (or --runlog)"
        )));
    }
    Ok(tenants)
}

/// Each `[providers.NAME.limits]`, for the gateway to keep.
fn quota_plans(config: &Config) -> Vec<QuotaPlan> {
    config
        .providers
        .iter()
        .filter_map(|(name, section)| {
            let limits = section.limits?;
            Some(QuotaPlan {
                provider: name.clone(),
                requests: limits.requests,
                tokens: limits.tokens,
                input_tokens: limits.input_tokens,
                output_tokens: limits.output_tokens,
            })
        })
        .collect()
}

/// The run log `serve` keeps (`--runlog`, else `[runlog] url`; none when
/// both are empty), opened (created if missing), with its URL.
async fn server_runlog(
    config: &Config,
    options: &ServerOptions,
) -> Result<(String, Option<Arc<dyn RunLog>>), ServeError> {
    let url = options
        .runlog
        .clone()
        .unwrap_or_else(|| config.runlog.url.clone());
    if url.is_empty() {
        return Ok((url, None));
    }
    let log = open_runlog(&url, OpenLog::CreateIfMissing, &config.runlog)
        .await
        .map_err(|e| ServeError::Setup(format!("run log: {e}")))?;
    Ok((url, Some(log)))
}

/// Checks the config, builds the host (reading API keys), compiles the
/// `--packs` folder and opens the run log.
pub(crate) async fn setup(config: &Config, options: &ServerOptions) -> Result<Setup, ServeError> {
    let setup = ServeError::Setup;
    let listen = || parse_listen(&config.server.listen);
    let addr = options.listen.map_or_else(listen, Ok);
    let addr = addr.map_err(|m| setup(format!("server.listen: {m}")))?;
    let env = options.env.clone();
    let admin_token = auth::admin_token(
        &config.server.token_env,
        addr,
        config.tenants.len(),
        options.open,
        |k| env(k),
    )
    .map_err(setup)?;
    let telemetry =
        Telemetry::from_config(&config.telemetry, |k| env(k)).map_err(|e| setup(e.to_string()))?;
    let (runlog_url, runlog) = server_runlog(config, options).await?;
    if let Some(name) = quota_plans(config).first().map(|q| &q.provider)
        && runlog.is_none()
    {
        return Err(setup(format!(
            "providers.{name}.limits: a provider's quota is kept in the run log, across hosts; \
             set [runlog] url (or --runlog)"
        )));
    }
    if config.response_cache.on() && runlog.is_none() {
        return Err(setup(
            "responseCache.mode: the cache keeps its answers in the run log: set [runlog] url \
             (or --runlog)"
                .into(),
        ));
    }
    // Every request is priced once, by the engine, at these prices: for
    // its trace, its span, its metric and a budget in money alike.
    let prices = Arc::new(PriceList::load(config).map_err(|e| setup(e.to_string()))?);
    let host = config
        .host_builder(&|k| env(k))
        .and_then(|builder| builder.mock(mock(config)).prices(prices).build())
        .map_err(|e| setup(e.to_string()))?;
    let packs = open_packs(config, options).await?;
    let tenants = callers(
        config,
        &host,
        admin_token.as_deref(),
        &env,
        runlog.is_some(),
    )?;
    let spans = telemetry
        .clone()
        .map(|t| Arc::new(Exported(t)) as Arc<dyn Spans>);
    Ok(Setup {
        addr,
        gateway: Parts {
            host,
            packs,
            tenants,
            runlog,
            spans,
            server: config.server.clone(),
            runlog_config: config.runlog.clone(),
            response_cache: config.response_cache.clone(),
            quotas: quota_plans(config),
        },
        telemetry,
        runlog_url,
    })
}

//! [`Host`]: the retry engine of one host with its config and providers, and
//! the routing and policy decided before any request is sent.

use crate::budget::{self, Bounds, Charges, Held, ReserveError, SharedBudget};
use crate::config::UnknownFields;
use crate::config::{ConfigError, HostConfig, invalid};
use crate::engine::{
    CallMachine, CallSpec, Charging, Clock, CompiledSchema, CompiledTools, DriveOptions, Effects,
    Jitter, SchemaCache, Sleeper, Target, drive,
};
use crate::events::{Event, EventSink};
use crate::mock::{MockProvider, MockScript};
use crate::observe::{CallStart, CallWatch, SharedObserver};
use crate::provider::DeltaSink;
use crate::provider::{Provider, Providers};
use callai_wire::{CallError, CallRequest, CallResult, StructuredOutput, UnknownField};
use std::sync::Arc;
use tokio::time::Instant;

/// Serves ctx.callAI: one call in, every provider request it needs sent and
/// counted, one result or error out. No wasm in here; packs reach it through
/// `callai_host::PackRuntime`, and other hosts can call it directly.
///
/// ```
/// use callai_engine::{EventLog, Host, HostConfig, MockProvider, MockScript};
/// use callai_engine::wire::{CallRequest, RetryField};
///
/// let config = HostConfig::default();
/// let mock = MockProvider::new(MockScript::replies([("Hello!", 3)]), callai_wire::StructuredOutput::Native);
/// let host = Host::builder(config).mock(mock).build()?;
/// let request = CallRequest::from_json(
///     r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 1}}"#,
///     RetryField::Honoured,
/// ).unwrap();
///
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let result = rt.block_on(host.call("demo.node", &request, &EventLog::new())).unwrap();
/// assert_eq!(result.content.as_deref(), Some("Hello!"));
/// assert_eq!(result.attempts.unwrap().count, 1);
/// # Ok::<(), callai_engine::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Host {
    config: Arc<HostConfig>,
    providers: Providers,
    effects: Effects,
    schemas: Arc<SchemaCache>,
}

/// How one call is made, beyond its request.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// The run's deadline: a backoff wait that would end past it gives up at
    /// once, with `provider_unavailable` saying so.
    pub deadline: Option<Instant>,
    /// Told of the call and of each provider request it sends (traces,
    /// metrics).
    pub observer: Option<SharedObserver>,
    /// For a text call whose caller streams: where its text goes as the
    /// provider sends it. Once some has gone, the call is not retried.
    pub deltas: Option<DeltaSink>,
    /// The budget the call is held to: its worst case is reserved before
    /// any request, and what it spent is charged when it ends.
    pub budget: Option<SharedBudget>,
}

/// Builds a [`Host`]: the built-in mock and the providers registered with
/// it (an embedder's own, or the HTTP ones `callai-providers` starts from
/// the config's `[providers.NAME]` sections).
pub struct HostBuilder {
    config: HostConfig,
    mock: Option<MockProvider>,
    extra: Providers,
    effects: Effects,
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("extra", &self.extra)
            .finish_non_exhaustive()
    }
}

impl HostBuilder {
    /// The mock provider to use (default: an empty script, so a request to
    /// `mock` fails at once until a script is given).
    pub fn mock(mut self, mock: MockProvider) -> Self {
        self.mock = Some(mock);
        self
    }

    /// Registers an embedder's own provider under `name`; requests, routing
    /// and `policy.allowedProviders` treat it like a configured one. It
    /// replaces a configured provider of the same name.
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.extra.insert(name, provider);
        self
    }

    /// Registers every provider of `providers` under its name, as
    /// [`HostBuilder::provider`] does one.
    pub fn providers(mut self, providers: Providers) -> Self {
        self.extra.extend(providers);
        self
    }

    /// The clock the engine reads (default: tokio's, paused in paused tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.effects.clock = clock;
        self
    }

    /// How the engine waits between requests (default: tokio's timer).
    pub fn sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.effects.sleeper = sleeper;
        self
    }

    /// Where backoff jitter comes from (default: seeded from the clock).
    pub fn jitter(mut self, jitter: Arc<dyn Jitter>) -> Self {
        self.effects.jitter = jitter;
        self
    }

    /// Checks that `defaults.provider` and `policy.allowedProviders` name
    /// providers that exist, and builds the host.
    pub fn build(self) -> Result<Host, ConfigError> {
        let config = self.config;
        let mock = self.mock.unwrap_or_else(|| {
            MockProvider::new(MockScript::default(), config.mock.structured_output())
                .with_latency(config.mock.latency())
        });
        let mut providers = Providers::new().with("mock", Arc::new(mock));
        providers.extend(self.extra);
        let mut host = Host::new(Arc::new(config), providers)?;
        host.effects = self.effects;
        Ok(host)
    }
}

impl Host {
    /// Starts building a host for `config`.
    pub fn builder(config: HostConfig) -> HostBuilder {
        HostBuilder {
            config,
            mock: None,
            extra: Providers::new(),
            effects: Effects::default(),
        }
    }

    /// A host calling exactly `providers` under `config`; refused when
    /// `defaults.provider` or `policy.allowedProviders` names a provider
    /// that is not there.
    pub fn new(config: Arc<HostConfig>, providers: Providers) -> Result<Self, ConfigError> {
        let known: Vec<&str> = providers.names().collect();
        if let Some(allowed) = &config.policy.allowed_providers {
            for (i, name) in allowed.iter().enumerate() {
                if !known.contains(&name.as_str()) {
                    return Err(invalid(
                        &format!("policy.allowedProviders[{i}]"),
                        format!(
                            "names provider {name:?}, which this host does not have (known: {known:?})"
                        ),
                    ));
                }
            }
        }
        let default = config.defaults.provider.as_str();
        if !known.contains(&default) {
            return Err(invalid(
                "defaults.provider",
                format!(
                    "names provider {default:?}, which this host does not have (known: {known:?})"
                ),
            ));
        }
        if !config.provider_allowed(default) {
            return Err(invalid(
                "defaults.provider",
                format!("provider {default:?} is not in policy.allowedProviders"),
            ));
        }
        crate::routing::check_routes(&config, &providers)?;
        let limits = config.limits;
        Ok(Self {
            config,
            providers,
            effects: Effects::default(),
            schemas: Arc::new(SchemaCache::new(
                limits.schema_cache_bytes,
                limits.max_schema_work,
            )),
        })
    }

    /// The same host with `provider` under `name` (e.g. a mock serving one
    /// run's script).
    pub fn with_provider(&self, name: &str, provider: Arc<dyn Provider>) -> Self {
        Self {
            config: self.config.clone(),
            providers: self.providers.clone().with(name, provider),
            effects: self.effects.clone(),
            schemas: self.schemas.clone(),
        }
    }

    /// The same host with its policy narrowed to `allowed` (a caller's own
    /// list, as `callai serve`'s tenants have): a request may name a
    /// provider only if both this host's policy and `allowed` let it.
    pub fn narrowed_to(&self, allowed: &[String]) -> Self {
        let mut config = (*self.config).clone();
        let narrowed = allowed
            .iter()
            .filter(|p| config.provider_allowed(p))
            .cloned()
            .collect();
        config.policy.allowed_providers = Some(narrowed);
        Self {
            config: Arc::new(config),
            providers: self.providers.clone(),
            effects: self.effects.clone(),
            schemas: self.schemas.clone(),
        }
    }

    /// The host config.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The providers requests may reach, before the policy.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// The clock, sleeper and random source the engine uses.
    pub(crate) fn effects(&self) -> &Effects {
        &self.effects
    }

    /// The providers a request may name: every provider the policy allows.
    pub fn allowed_providers(&self) -> Vec<&str> {
        self.providers
            .names()
            .filter(|p| self.config.provider_allowed(p))
            .collect()
    }

    /// Runs one ctx.callAI call for `node_id`. The request must have been
    /// checked (`CallRequest::from_json`, or `check` for a typed one); its
    /// `retry` is read only when the host advertises `retryPolicy`. Its
    /// `responseSchema` is compiled here, and refused with
    /// `validation_error` when it is not a usable JSON Schema.
    pub async fn call(
        &self,
        node_id: &str,
        request: &CallRequest,
        events: &dyn EventSink,
    ) -> Result<CallResult, CallError> {
        self.call_with(node_id, request, events, CallOptions::default())
            .await
    }

    /// Reserves the call's worst case on `budget` (reaching `targets`); a
    /// refusal says what is left, when the window resets, and the most
    /// attempts that fit now.
    async fn reserve(
        &self,
        budget: &SharedBudget,
        request: &CallRequest,
        targets: &[Target<'_>],
        schema_bytes: Option<u64>,
        overhead: u64,
    ) -> Result<Held, CallError> {
        let money = budget.money();
        let charges = match money {
            Some(money) => Charges::of(money, targets)?,
            None => Charges::default(),
        };
        let bounds = Bounds {
            schema_bytes,
            overhead,
            rate: charges.rate(),
        };
        let worst = budget::worst_case(&self.config, request, &bounds);
        Held::reserve(budget, worst, charges)
            .await
            .map_err(|refused| match refused {
                ReserveError::Failed(e) => e,
                ReserveError::Refused(r) => r.into_error(
                    budget::fitting_attempts(&self.config, request, &bounds, &r.room),
                    money.map(|m| &*m.currency),
                ),
            })
    }

    /// [`Host::call`], with `options`.
    pub async fn call_with(
        &self,
        node_id: &str,
        request: &CallRequest,
        events: &dyn EventSink,
        options: CallOptions,
    ) -> Result<CallResult, CallError> {
        let chain = match self.chain(request) {
            Ok(chain) => chain,
            Err(e) => {
                if let Some(o) = &options.observer {
                    o.call_refused(node_id, &e);
                }
                return Err(e);
            }
        };
        let first = &chain.targets[0];
        let structured = StructuredOutput::native_if(first.native);
        let mut watch = options.observer.as_ref().map(|o| {
            o.call_started(&CallStart {
                node_id,
                route: chain.route,
                provider: first.provider,
                model: &first.model,
                max_tokens: request
                    .max_tokens
                    .unwrap_or(self.config.retry.default_max_tokens)
                    .min(self.config.retry.provider_max_tokens),
                structured: request.response_schema.as_ref().map(|_| structured),
                request,
            })
        });
        let (schema, tools) = match self.compile(request) {
            Ok(compiled) => compiled,
            Err(e) => {
                if let Some(w) = watch {
                    w.call_finished(Err(&e));
                }
                return Err(e);
            }
        };
        let schema_bytes = carried_bytes(schema.as_ref(), tools.as_ref());
        // A reservation covers the whole chain: every attempt at the
        // largest overhead of any target it may reach.
        let overhead = chain.overhead();
        let held = match &options.budget {
            Some(budget) => match self
                .reserve(budget, request, &chain.targets, schema_bytes, overhead)
                .await
            {
                Ok(held) => Some(held),
                Err(e) => {
                    if let Some(w) = watch {
                        w.call_finished(Err(&e));
                    }
                    return Err(e);
                }
            },
            None => None,
        };
        let machine = CallMachine::new(CallSpec {
            config: &self.config,
            node_id,
            request,
            schema,
            tools,
            targets: &chain.targets,
        });
        let max_response_bytes = self.config.limits.max_response_bytes;
        let drive_options = DriveOptions {
            deadline: options.deadline,
            max_response_bytes,
            deltas: options.deltas.as_ref(),
            tally: held.as_ref().map(|h| Charging {
                tally: &h.tally,
                budget: &*h.budget,
                charges: &h.charges,
            }),
            schema_bytes: schema_bytes.unwrap_or(0),
            overhead,
        };
        let result = drive(
            machine,
            &chain.providers,
            &self.effects,
            events,
            drive_options,
            watch.as_deref_mut().map(|w| w as &mut dyn CallWatch),
        )
        .await;
        if let Some(held) = held {
            held.settle().await;
        }
        if let Some(w) = watch {
            w.call_finished(result.as_ref());
        }
        result
    }

    /// The JSON entry: parses and checks `request` (refusing a malformed
    /// `retry` when the host honours it, and a field the spec does not
    /// define as `[policy] unknownRequestFields` says), then calls.
    pub async fn call_json(
        &self,
        node_id: &str,
        request: &str,
        events: &dyn EventSink,
    ) -> Result<CallResult, CallError> {
        let retry = self.config.call_accounting.retry_field();
        let (request, unknown) = CallRequest::from_json_naming_unknown(request, retry)?;
        self.unknown_fields(node_id, unknown, events)?;
        self.call(node_id, &request, events).await
    }

    /// What `[policy] unknownRequestFields` makes of a JSON request's
    /// fields the spec does not define: a `request.unknownFields` event
    /// naming them (`warn`), a refusal naming the first (`refuse`), or
    /// nothing (`ignore`).
    pub(crate) fn unknown_fields(
        &self,
        node_id: &str,
        fields: Vec<UnknownField>,
        events: &dyn EventSink,
    ) -> Result<(), CallError> {
        match (fields.first(), self.config.policy.unknown_request_fields) {
            (None, _) | (_, UnknownFields::Ignore) => Ok(()),
            (Some(first), UnknownFields::Refuse) => Err(CallError::validation(
                &first.name,
                format!("{first}; this host refuses fields it does not know"),
            )),
            (Some(_), UnknownFields::Warn) => {
                events.emit(Event::UnknownRequestFields {
                    node_id: node_id.to_owned(),
                    fields,
                });
                Ok(())
            }
        }
    }

    /// A request's `responseSchema` and tools, compiled (`None` when it has
    /// none): a schema that is not usable is refused naming its field, and
    /// tools are refused naming `tools` when this host does not offer tool
    /// calls (`[policy] toolCalls`).
    fn compile(
        &self,
        request: &CallRequest,
    ) -> Result<(Option<CompiledSchema>, Option<CompiledTools>), CallError> {
        self.check_image_sizes(request)?;
        let schema = request
            .response_schema
            .as_ref()
            .map(|s| self.schemas.compile(s))
            .transpose()?;
        Ok((schema, self.compile_tools(request)?))
    }

    /// The tools a request offers, compiled.
    fn compile_tools(&self, request: &CallRequest) -> Result<Option<CompiledTools>, CallError> {
        if !request.offers_tools() {
            return Ok(None);
        }
        if !self.config.policy.tool_calls {
            return Err(CallError::validation(
                "tools",
                "this host does not offer tool calls (its aiProviders facet has no toolCalls)",
            ));
        }
        CompiledTools::compile(request, &self.schemas)
    }
}

/// What each attempt carries beyond its messages: the schema's text and
/// the tools' (`None` for a call with neither). A call with either may be
/// retried with corrective text and a grown budget.
fn carried_bytes(schema: Option<&CompiledSchema>, tools: Option<&CompiledTools>) -> Option<u64> {
    (schema.is_some() || tools.is_some()).then(|| {
        schema.map_or(0, CompiledSchema::text_bytes) + tools.map_or(0, CompiledTools::text_bytes)
    })
}

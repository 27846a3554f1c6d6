//! [`Host`]: the retry engine of one host with its config and providers, and
//! the routing and policy decided before any request is sent.

use crate::breaker::{Breakers, TargetHealth};
use crate::budget::{self, Bounds, Charges, Held, Quotas, ReserveError, SharedBudget};
use crate::config::UnknownFields;
use crate::config::{ConfigError, HostConfig, invalid};
use crate::cost::{PriceBook, TargetPrices};
use crate::engine::{
    CallMachine, CallSpec, Charging, CompiledSchema, CompiledTools, DriveOptions, Effects, Events,
    SchemaCache, Target, drive,
};
use crate::events::{Event, EventSink};
use crate::observe::{CallStart, CallWatch, SharedObserver};
use crate::provider::DeltaSink;
use crate::provider::Providers;
use crate::routing::Chain;

mod builder;
mod views;
pub use builder::HostBuilder;
use callai_wire::{CallError, CallRequest, CallResult, ErrorCode, StructuredOutput, UnknownField};
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
    /// Whose calls these are, for the schema cache's share
    /// ([`Host::owned_by`]); empty for the host's own.
    owner: Arc<str>,
    /// What provider requests are charged at ([`HostBuilder::prices`]).
    prices: Option<Arc<dyn PriceBook>>,
    /// Each target's circuit breaker, shared by every view of this host.
    breakers: Arc<Breakers>,
    /// The providers' quotas ([`Host::set_quotas`]), shared by every view.
    quotas: Arc<std::sync::OnceLock<Quotas>>,
}

/// `e`, the call's end before any request, told to its `watch`.
fn ended(watch: Option<Box<dyn CallWatch>>, e: CallError) -> CallError {
    if let Some(w) = watch {
        w.call_finished(Err(&e));
    }
    e
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

impl Host {
    /// Starts building a host for `config`.
    pub fn builder(config: HostConfig) -> HostBuilder {
        HostBuilder::new(config)
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
            providers,
            effects: Effects::default(),
            schemas: Arc::new(SchemaCache::new(
                limits.schema_cache_bytes,
                limits.max_schema_work,
            )),
            owner: Arc::from(""),
            prices: None,
            breakers: Arc::new(Breakers::new(
                config.retry.circuit_breaker_failures,
                std::time::Duration::from_millis(config.retry.circuit_breaker_cool_down_ms),
            )),
            quotas: Arc::default(),
            config,
        })
    }

    /// Each target's health as its circuit breaker last saw it: its state,
    /// its unavailable answers in a row, its requests and failures.
    pub fn target_health(&self) -> Vec<TargetHealth> {
        self.breakers.health(self.effects.clock.now().into_std())
    }

    /// Holds each provider's requests to its quota in `quotas`, on this
    /// host and every view of it (made before or after), once: false when
    /// it already had them. A host without a run log's quotas has none.
    pub fn set_quotas(&self, quotas: Quotas) -> bool {
        self.quotas.set(quotas).is_ok()
    }

    pub(crate) fn breakers(&self) -> &Breakers {
        &self.breakers
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
        (targets, prices): (&[Target<'_>], &TargetPrices),
        schema_bytes: Option<u64>,
        overhead: u64,
    ) -> Result<Held, CallError> {
        let money = budget.money();
        let charges = match money {
            Some(money) => Charges::of(money, prices, targets)?,
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
                ReserveError::Refused(r) => {
                    let fits = budget::Fits {
                        attempts: budget::fitting_attempts(&self.config, request, &bounds, &r.room),
                        max_tokens: budget::fitting_max_tokens(
                            &self.config,
                            request,
                            &bounds,
                            &r.room,
                        ),
                    };
                    r.into_error(fits, money.map(|m| &*m.currency))
                }
            })
    }

    /// What observers are told of a call of `node_id` going along `chain`
    /// as it starts.
    fn call_start<'a>(
        &self,
        node_id: &'a str,
        request: &'a CallRequest,
        chain: &'a Chain<'a>,
    ) -> CallStart<'a> {
        let first = &chain.targets[0];
        let structured = StructuredOutput::native_if(first.native);
        CallStart {
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
        }
    }

    /// `targets`' prices, looked up once for a call's requests, when
    /// anything is `told` what they cost (a watch, a budget); none else.
    fn prices_of(&self, targets: &[Target<'_>], told: bool) -> TargetPrices {
        TargetPrices::of(self.prices.as_deref().filter(|_| told), targets)
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
        let mut watch = options
            .observer
            .as_ref()
            .map(|o| o.call_started(&self.call_start(node_id, request, &chain)));
        let (schema, tools) = match self.compile(request) {
            Ok(compiled) => compiled,
            Err(e) => return Err(ended(watch, e)),
        };
        let schema_bytes = carried_bytes(schema.as_ref(), tools.as_ref());
        // A reservation covers the whole chain: every attempt at the
        // largest overhead of any target it may reach.
        let overhead = chain.overhead();
        let told = watch.is_some() || options.budget.is_some();
        let prices = self.prices_of(&chain.targets, told);
        let held = match &options.budget {
            Some(budget) => match self
                .reserve(
                    budget,
                    request,
                    (&chain.targets, &prices),
                    schema_bytes,
                    overhead,
                )
                .await
            {
                Ok(held) => Some(held),
                Err(e) => return Err(ended(watch, e)),
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
            events: match events.keeps() {
                true => Events::Made,
                false => Events::Skipped,
            },
        });
        let drive_options = DriveOptions {
            deadline: options.deadline,
            max_response_bytes: self.config.limits.max_response_bytes,
            deltas: options.deltas.as_ref(),
            tally: held.as_ref().map(|h| Charging {
                tally: &h.tally,
                budget: &*h.budget,
                charges: &h.charges,
            }),
            schema_bytes: schema_bytes.unwrap_or(0),
            overhead,
            prices: &prices,
            breakers: &self.breakers,
            quotas: self.quotas.get().filter(|q| !q.is_empty()),
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
            .map(|s| self.schemas.compile(s, &self.owner))
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
        let (offered, most) = (
            request.tools.as_ref().map_or(0, Vec::len),
            self.config.limits.max_tools,
        );
        if offered > most as usize {
            // Refused before a schema is compiled: each costs memory and CPU.
            return Err(CallError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "limits.maxTools: the request offers {offered} tools, over the limit of {most}"
                ),
            )
            .with_detail("field", "tools"));
        }
        CompiledTools::compile(request, &self.schemas, &self.owner)
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

#[cfg(test)]
mod event_tests;
#[cfg(test)]
mod priced_tests;

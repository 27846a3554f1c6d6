//! `[providers.NAME]`: the real providers a host may call, by name.

use crate::quota::ProviderLimits;
use crate::transport::settings::{Http2, TransportSettings};
use crate::upstream::{KeyHeader, MaxTokensField};
use crate::vertex::VertexConfig;
use callai_engine::config::{ConfigError, invalid};
use callai_engine::cost::currency_code_problem;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, LM Studio).
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
    /// Google's Gemini API (`generateContent`).
    Gemini,
    /// Amazon Bedrock's Converse API.
    Bedrock,
}

impl ProviderKind {
    /// `openai`, `anthropic`, `gemini` or `bedrock`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Bedrock => "bedrock",
        }
    }

    /// The kind a section of this name implies (`[providers.openai]`).
    pub fn implied_by(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::Openai),
            "anthropic" => Some(Self::Anthropic),
            "gemini" => Some(Self::Gemini),
            "bedrock" => Some(Self::Bedrock),
            _ => None,
        }
    }

    /// The API root used when `baseUrl` is absent.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com/v1",
            Self::Gemini => "https://generativelanguage.googleapis.com/v1beta",
            // Its region's: see [`ProviderConfig::settings`].
            Self::Bedrock => "https://bedrock-runtime.us-east-1.amazonaws.com",
        }
    }

    /// The key variable used when `apiKeyEnv` is absent.
    pub fn default_key_env(self) -> &'static str {
        match self {
            Self::Openai => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
            Self::Gemini => "GEMINI_API_KEY",
            // SigV4 from the AWS variables, unless a Bedrock API key's
            // variable is named.
            Self::Bedrock => "",
        }
    }

    /// The header the key goes in when `keyHeader` is absent.
    pub fn default_key_header(self) -> KeyHeader {
        match self {
            Self::Openai => KeyHeader::Authorization,
            Self::Anthropic => KeyHeader::XApiKey,
            Self::Gemini => KeyHeader::XGoogApiKey,
            Self::Bedrock => KeyHeader::Authorization,
        }
    }

    /// Input tokens reserved per attempt for what the provider adds to a
    /// request unseen when `inputOverheadTokens` is absent: Anthropic puts
    /// a tool-use system prompt before a forced tool call (native
    /// structured output), 313 to 346 tokens on current models by its
    /// documentation; OpenAI-compatible servers add nothing the request's
    /// own per-message and per-request margins do not cover.
    pub fn default_input_overhead(self) -> u64 {
        match self {
            Self::Openai | Self::Gemini => 0,
            // Claude on Bedrock adds the same tool-use prompt.
            Self::Anthropic | Self::Bedrock => 400,
        }
    }

    /// The model used when `model` is absent.
    pub fn default_model(self) -> &'static str {
        match self {
            Self::Openai => "gpt-4o-mini",
            Self::Anthropic => "claude-sonnet-4-5",
            Self::Gemini => "gemini-2.5-flash",
            Self::Bedrock => "anthropic.claude-3-5-haiku-20241022-v1:0",
        }
    }
}

/// `[providers.NAME] api`: which of OpenAI's APIs an OpenAI-kind provider
/// is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiApi {
    /// Chat Completions (`/chat/completions`), which every compatible
    /// server speaks.
    #[default]
    Chat,
    /// The Responses API (`/responses`), for models offered only there.
    Responses,
}

impl OpenAiApi {
    /// Whether it is the default, Chat Completions.
    pub fn is_chat(&self) -> bool {
        *self == Self::Chat
    }
}

/// Every `[providers.NAME]` section, by name.
pub type ProvidersConfig = BTreeMap<String, ProviderConfig>;

/// One `[providers.NAME]` section. Absent keys take the kind's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderConfig {
    /// The wire format; implied by a section named `openai`, `anthropic`,
    /// `gemini` or `bedrock`.
    pub kind: Option<ProviderKind>,
    /// API root, e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// The environment variable holding the API key; `""`: no key.
    pub api_key_env: Option<String>,
    /// The default model.
    pub model: Option<String>,
    /// Native structured output; false puts the schema in the prompt.
    pub native: Option<bool>,
    /// Whether its model takes images (true by default).
    pub vision: Option<bool>,
    /// Per-request timeout.
    pub timeout_ms: Option<u64>,
    /// Input tokens the provider adds to each request unseen (a hidden
    /// system prompt), reserved for each attempt of a budgeted call.
    pub input_overhead_tokens: Option<u64>,
    /// The field the token limit goes in (`auto` by default).
    pub max_tokens_field: Option<MaxTokensField>,
    /// Which of OpenAI's APIs an OpenAI-kind provider is sent (`chat` by
    /// default; `responses` for models offered only there).
    pub api: Option<OpenAiApi>,
    /// The header the key goes in (by kind when absent).
    pub key_header: Option<KeyHeader>,
    /// Headers sent on every request (never the key's).
    pub headers: Option<BTreeMap<String, String>>,
    /// Query parameters added to the endpoint (an Azure `api-version`).
    pub query: Option<BTreeMap<String, String>>,
    /// Fields merged into every request body (none the host sets itself).
    pub extra_body: Option<Map<String, Value>>,
    /// What its tokens cost, per million (`[providers.NAME.prices]`).
    pub prices: Option<Prices>,
    /// Its quota a minute, across hosts (`[providers.NAME.limits]`).
    pub limits: Option<ProviderLimits>,
    /// PEM certificates trusted for this provider only.
    pub ca_file: Option<PathBuf>,
    /// This host's certificate chain for mutual TLS (PEM).
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub client_key: Option<PathBuf>,
    /// A CONNECT proxy for its requests.
    pub proxy: Option<String>,
    /// The variable holding the proxy's `user:password`.
    pub proxy_auth_env: Option<String>,
    /// The HTTP version (`auto` by default).
    pub http2: Option<Http2>,
    /// The most connections open to it at once.
    pub max_connections: Option<usize>,
    /// The most streams on one HTTP/2 connection.
    pub max_streams_per_connection: Option<usize>,
    /// How long an unused connection stays open.
    pub idle_ms: Option<u64>,
    /// Vertex AI's project, location and token (a Gemini-kind provider).
    pub vertex: Option<VertexConfig>,
    /// The AWS region of a Bedrock-kind provider.
    pub region: Option<String>,
    /// The AWS profile whose credentials sign a Bedrock-kind provider's
    /// requests.
    pub profile: Option<String>,
}

/// `[providers.NAME.prices]`: what a provider's tokens cost, per million,
/// whatever model a request names of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Prices {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million input tokens read from the prompt cache (`input`
    /// unless said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Per million input tokens written to the prompt cache (Anthropic's
    /// cache creation; `input` unless said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// The currency of all (`USD` unless said).
    #[serde(default = "usd")]
    pub currency: String,
}

fn usd() -> String {
    "USD".into()
}

/// A section with its defaults filled in (serialized as its section,
/// every key spelt as the config spells it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSettings {
    /// The section name: what a request's `provider` names.
    #[serde(skip)]
    pub name: String,
    /// The wire format.
    pub kind: ProviderKind,
    /// API root.
    pub base_url: String,
    /// The key variable; empty for none.
    pub api_key_env: String,
    /// The default model.
    pub model: String,
    /// Native structured output.
    pub native: bool,
    /// Whether its model takes images.
    pub vision: bool,
    /// Per-request timeout in milliseconds.
    pub timeout_ms: u64,
    /// Input tokens reserved per attempt for what the provider adds unseen.
    pub input_overhead_tokens: u64,
    /// The field the token limit goes in.
    pub max_tokens_field: MaxTokensField,
    /// Which of OpenAI's APIs it is sent.
    #[serde(skip_serializing_if = "OpenAiApi::is_chat")]
    pub api: OpenAiApi,
    /// The header the key goes in.
    pub key_header: KeyHeader,
    /// Headers sent on every request.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Query parameters added to the endpoint.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Fields merged into every request body.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub extra_body: Map<String, Value>,
    /// What its tokens cost, per million.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
    /// Its quota a minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<ProviderLimits>,
    /// How its server is reached.
    #[serde(flatten)]
    pub transport: TransportSettings,
    /// Vertex AI's project, location and token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vertex: Option<VertexConfig>,
    /// The AWS region (a Bedrock-kind provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The AWS profile of the shared files (a Bedrock-kind provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl ProviderConfig {
    /// The kind this section speaks, or the error naming its `kind` key.
    pub fn resolved_kind(&self, name: &str) -> Result<ProviderKind, ConfigError> {
        match (self.kind, ProviderKind::implied_by(name)) {
            (Some(kind), Some(implied)) if kind != implied => Err(invalid(
                &format!("providers.{name}.kind"),
                format!(
                    "a section named {name:?} speaks {}, not {}",
                    implied.as_str(),
                    kind.as_str()
                ),
            )),
            (Some(kind), _) | (None, Some(kind)) => Ok(kind),
            (None, None) => Err(invalid(
                &format!("providers.{name}.kind"),
                "is required for a provider not named openai, anthropic, gemini or bedrock \
                 (\"openai\", \"anthropic\", \"gemini\" or \"bedrock\")"
                    .into(),
            )),
        }
    }

    /// The section with its defaults filled in.
    pub fn settings(&self, name: &str) -> Result<ProviderSettings, ConfigError> {
        let kind = self.resolved_kind(name)?;
        Ok(ProviderSettings {
            name: name.to_owned(),
            kind,
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| match (&self.vertex, &self.region) {
                    (Some(vertex), _) => vertex.default_base_url(),
                    (None, Some(region)) if kind == ProviderKind::Bedrock => {
                        format!("https://bedrock-runtime.{region}.amazonaws.com")
                    }
                    _ => kind.default_base_url().into(),
                }),
            // Vertex AI takes a bearer token, not a key.
            api_key_env: self
                .api_key_env
                .clone()
                .unwrap_or_else(|| match self.vertex {
                    Some(_) => String::new(),
                    None => kind.default_key_env().into(),
                }),
            model: self
                .model
                .clone()
                .unwrap_or_else(|| kind.default_model().into()),
            native: self.native.unwrap_or(true),
            vision: self.vision.unwrap_or(true),
            timeout_ms: self.timeout_ms.unwrap_or(60_000),
            input_overhead_tokens: self
                .input_overhead_tokens
                .unwrap_or_else(|| kind.default_input_overhead()),
            max_tokens_field: self.max_tokens_field.unwrap_or_default(),
            api: self.api.unwrap_or_default(),
            key_header: self.key_header.unwrap_or_else(|| kind.default_key_header()),
            headers: self.headers.clone().unwrap_or_default(),
            query: self.query.clone().unwrap_or_default(),
            extra_body: self.extra_body.clone().unwrap_or_default(),
            prices: self.prices.clone(),
            limits: self.limits,
            transport: self.transport(),
            vertex: self.vertex.clone(),
            region: self.region.clone(),
            profile: self.profile.clone(),
        })
    }
}

/// Checks every section: a name, a kind, a usable URL and timeout.
pub fn validate(sections: &ProvidersConfig) -> Result<(), ConfigError> {
    for (name, section) in sections {
        if name == "mock" {
            return Err(invalid(
                "providers.mock",
                "the mock provider is built in; configure it under [mock]".into(),
            ));
        }
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid_name {
            return Err(invalid(
                &format!("providers.{name}"),
                "a provider name is letters, digits, '-' and '_'".into(),
            ));
        }
        let s = section.settings(name)?;
        if !(1..=3_600_000).contains(&s.timeout_ms) {
            return Err(invalid(
                &format!("providers.{name}.timeoutMs"),
                format!("must be 1..3600000, got {}", s.timeout_ms),
            ));
        }
        if let Some(prices) = &section.prices {
            let cached = ("cachedInput", prices.cached_input.unwrap_or(0.0));
            let written = ("cacheWrite", prices.cache_write.unwrap_or(0.0));
            let all = [
                ("input", prices.input),
                ("output", prices.output),
                cached,
                written,
            ];
            for (key, value) in all {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(invalid(
                        &format!("providers.{name}.prices.{key}"),
                        format!("must be a price of 0 or more, got {value}"),
                    ));
                }
            }
            if let Some(problem) = currency_code_problem(&prices.currency) {
                return Err(invalid(
                    &format!("providers.{name}.prices.currency"),
                    problem,
                ));
            }
        }
        if let Some(limits) = &s.limits {
            limits.check(name)?;
        }
        crate::transport::settings::check(name, &s.transport)?;
        if s.input_overhead_tokens > 1_000_000 {
            return Err(invalid(
                &format!("providers.{name}.inputOverheadTokens"),
                format!("must be 0..1000000, got {}", s.input_overhead_tokens),
            ));
        }
        check_kind_keys(name, section, &s)?;
        if s.kind == ProviderKind::Gemini && s.api == OpenAiApi::Responses {
            return Err(invalid(
                &format!("providers.{name}.api"),
                "a Gemini-kind provider speaks generateContent; api = \"responses\" is OpenAI's"
                    .into(),
            ));
        }
        if s.kind == ProviderKind::Anthropic && s.api == OpenAiApi::Responses {
            return Err(invalid(
                &format!("providers.{name}.api"),
                "an Anthropic-kind provider speaks the Messages API; api = \"responses\" is \
                 OpenAI's"
                    .into(),
            ));
        }
        if s.kind == ProviderKind::Anthropic
            && s.max_tokens_field == MaxTokensField::MaxCompletionTokens
        {
            return Err(invalid(
                &format!("providers.{name}.maxTokensField"),
                "the Messages API takes max_tokens only".into(),
            ));
        }
        crate::upstream::check(name, &s.headers, &s.query, &s.extra_body, None)?;
        let http_url = url::Url::parse(&s.base_url)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
        if !http_url {
            return Err(invalid(
                &format!("providers.{name}.baseUrl"),
                format!("must be an http:// or https:// URL, got {:?}", s.base_url),
            ));
        }
    }
    Ok(())
}

/// Checks the keys of one kind: `vertex` (a Gemini-kind provider's, with
/// no key), `region` and `profile` (a Bedrock-kind provider's).
fn check_kind_keys(
    name: &str,
    section: &ProviderConfig,
    s: &ProviderSettings,
) -> Result<(), ConfigError> {
    let elsewhere = |key: &str, kind: &str| {
        let why = format!(
            "is for a {kind}-kind provider; this one is {}",
            s.kind.as_str()
        );
        Err(invalid(&format!("providers.{name}.{key}"), why))
    };
    let key_named = section.api_key_env.as_ref().is_some_and(|k| !k.is_empty());
    match (&s.vertex, s.kind) {
        (Some(_), kind) if kind != ProviderKind::Gemini => return elsewhere("vertex", "Gemini"),
        (Some(vertex), _) => crate::vertex::check_section(name, key_named, vertex)?,
        (None, _) => {}
    }
    if s.kind == ProviderKind::Bedrock {
        let (region, profile) = (s.region.as_deref(), s.profile.as_deref());
        return crate::bedrock::check_section(name, region, profile, key_named);
    }
    match (&s.region, &s.profile) {
        (Some(_), _) => elsewhere("region", "Bedrock"),
        (None, Some(_)) => elsewhere("profile", "Bedrock"),
        (None, None) => Ok(()),
    }
}

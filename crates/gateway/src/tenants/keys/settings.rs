//! What an API key carries besides its secret, as `POST /v1/keys` and
//! `PATCH /v1/keys/{id}` take it and the run log keeps it: its limits, the
//! providers and models it may reach, and metadata for the operator.

use crate::config::{LimitConfig, is_tenant_name, validate_limits};
use crate::error::GatewayError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most limits, allowed names and metadata keys a key may carry.
const MAX_ITEMS: usize = 64;

/// A key's settings, kept as one JSON object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeySettings {
    /// Its own limits, on top of its tenant's.
    #[serde(default)]
    pub limits: Vec<LimitConfig>,
    /// The providers its calls may reach, within its tenant's; none: its
    /// tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_providers: Option<Vec<String>>,
    /// The models its calls may name (`[models]` names, `PROVIDER/MODEL`
    /// or a provider); none: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_models: Option<Vec<String>>,
    /// The operator's, shown back as given.
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

/// `POST /v1/keys`'s body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NewKey {
    /// A name for people.
    pub name: String,
    /// The tenant its calls and runs belong to: one of the config, or a
    /// new one.
    pub tenant: String,
    #[serde(default)]
    limits: Vec<LimitConfig>,
    #[serde(default)]
    allowed_providers: Option<Vec<String>>,
    #[serde(default)]
    allowed_models: Option<Vec<String>>,
    /// When it stops working (RFC 3339).
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

impl NewKey {
    /// Its settings.
    pub fn settings(&self) -> KeySettings {
        KeySettings {
            limits: self.limits.clone(),
            allowed_providers: self.allowed_providers.clone(),
            allowed_models: self.allowed_models.clone(),
            metadata: self.metadata.clone(),
        }
    }
}

/// `PATCH /v1/keys/{id}`'s body: each field given replaces the key's (an
/// explicit `null` clears `allowedProviders`, `allowedModels` or
/// `expiresAt`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeyPatch {
    /// A new name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub(super) limits: Option<Vec<LimitConfig>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) allowed_providers: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) allowed_models: Option<Option<Vec<String>>>,
    /// A new expiry (RFC 3339), or `null` for none.
    #[serde(default, deserialize_with = "present")]
    pub expires_at: Option<Option<String>>,
    #[serde(default)]
    pub(super) metadata: Option<Map<String, Value>>,
}

/// A field that is present: `Some(None)` for an explicit `null`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl KeyPatch {
    /// `settings` with the patch's fields in place.
    pub fn apply(&self, mut settings: KeySettings) -> KeySettings {
        if let Some(limits) = &self.limits {
            settings.limits = limits.clone();
        }
        if let Some(allowed) = &self.allowed_providers {
            settings.allowed_providers = allowed.clone();
        }
        if let Some(allowed) = &self.allowed_models {
            settings.allowed_models = allowed.clone();
        }
        if let Some(metadata) = &self.metadata {
            settings.metadata = metadata.clone();
        }
        settings
    }
}

/// Checks a key's name and tenant.
pub fn check_name(name: &str, tenant: &str) -> Result<(), GatewayError> {
    if name.trim().is_empty() || name.len() > 200 {
        return Err(GatewayError::invalid(
            "name",
            "a key needs a name of 1 to 200 bytes",
        ));
    }
    if !is_tenant_name(tenant) || tenant == crate::tenants::caller::ADMIN {
        return Err(GatewayError::invalid(
            "tenant",
            format!(
                "{tenant:?} cannot name a tenant: use 1 to 64 letters, digits, '_', '-' or '.' \
                 (and not {:?})",
                crate::tenants::caller::ADMIN
            ),
        ));
    }
    Ok(())
}

/// Checks `settings` for a key of `tenant` on a host whose providers are
/// `known`: each limit right, and every provider named one of them.
pub fn check(settings: &KeySettings, owner: &str, known: &[&str]) -> Result<(), GatewayError> {
    let too_many = [
        ("limits", settings.limits.len()),
        (
            "allowedProviders",
            settings.allowed_providers.as_ref().map_or(0, Vec::len),
        ),
        (
            "allowedModels",
            settings.allowed_models.as_ref().map_or(0, Vec::len),
        ),
        ("metadata", settings.metadata.len()),
    ];
    for (field, n) in too_many {
        if n > MAX_ITEMS {
            return Err(GatewayError::invalid(
                field,
                format!("{n} items; a key carries at most {MAX_ITEMS}"),
            ));
        }
    }
    validate_limits("limits", owner, &settings.limits, None)
        .map_err(|e| GatewayError::invalid("limits", e.to_string()))?;
    for (i, provider) in settings.allowed_providers.iter().flatten().enumerate() {
        if !known.contains(&provider.as_str()) {
            return Err(GatewayError::invalid(
                &format!("allowedProviders[{i}]"),
                format!(
                    "names provider {provider:?}, which this host does not have (known: {known:?})"
                ),
            ));
        }
    }
    Ok(())
}

/// `expiresAt` (RFC 3339) as ms since the Unix epoch.
pub fn expiry(at: Option<&str>) -> Result<Option<u64>, GatewayError> {
    let Some(at) = at else { return Ok(None) };
    let t: jiff::Timestamp = at.parse().map_err(|e| {
        GatewayError::invalid("expiresAt", format!("{at:?} is not an RFC 3339 time: {e}"))
    })?;
    u64::try_from(t.as_millisecond())
        .map(Some)
        .map_err(|_| GatewayError::invalid("expiresAt", format!("{at:?} is before 1970")))
}

//! What the admin does with API keys (`/v1/keys`): make one (its secret
//! shown once), list them, read one with its spend, change it, revoke it,
//! and read its audit list. Every change is written to the run log with
//! its audit entry, then read back into this host's table at once; other
//! hosts read it within their next refresh.

use crate::error::GatewayError;
use crate::tenants::keys::{KeyEntry, KeyPatch, NewKey, PREFIX, check, check_name, expiry, hash};
use crate::tenants::{Caller, Plan, Tenants, limit_answer};
use callai_engine::events::now_ms;
use callai_engine::runlog::{ApiKey, ApiKeyEvent, ApiKeyLog};
use serde_json::{Value, json};
use std::sync::Arc;

fn random<const N: usize>() -> Result<[u8; N], GatewayError> {
    let mut bytes = [0u8; N];
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut bytes)
        .map_err(|e| GatewayError::internal(format!("no random bytes for a key: {e}")))?;
    Ok(bytes)
}

fn time(ms: Option<u64>) -> Value {
    ms.map_or(Value::Null, |ms| Value::from(crate::ids::rfc3339(ms)))
}

fn internal(e: impl std::fmt::Display) -> GatewayError {
    GatewayError::internal(e.to_string())
}

impl Tenants {
    fn key_log(&self) -> Result<&dyn ApiKeyLog, GatewayError> {
        self.keys()
            .setup
            .get()
            .and_then(|s| s.log.api_keys())
            .ok_or_else(|| GatewayError::Forbidden {
                message: "API keys are kept in the run log, and this host has none: set \
                          [runlog] url (or --runlog)"
                    .into(),
                field: None,
            })
    }

    fn known_key(&self, id: &str) -> Result<Arc<KeyEntry>, GatewayError> {
        self.keys()
            .get(id)
            .ok_or_else(|| GatewayError::NotFound(format!("no API key {id:?}")))
    }

    async fn put(
        &self,
        key: &ApiKey,
        actor: &Caller,
        action: &str,
        detail: Value,
    ) -> Result<(), GatewayError> {
        let event = ApiKeyEvent {
            key_id: key.id.clone(),
            at_ms: now_ms(),
            actor: actor.name().to_owned(),
            action: action.to_owned(),
            detail: detail.to_string(),
        };
        self.key_log()?
            .put_api_key(key, &event)
            .await
            .map_err(internal)?;
        self.refresh_keys(true).await.map_err(internal)?;
        Ok(())
    }

    /// `POST /v1/keys`: a new key; the answer holds its secret, once.
    pub async fn create_key(&self, actor: &Caller, new: NewKey) -> Result<Value, GatewayError> {
        self.key_log()?;
        check_name(&new.name, &new.tenant)?;
        let settings = new.settings();
        let id = format!("key-{}", hex::encode(random::<8>()?));
        let known: Vec<&str> = self.admin().host.providers().names().collect();
        check(&settings, &format!("{}~{id}", new.tenant), &known)?;
        let expires_ms = expiry(new.expires_at.as_deref())?;
        if self.keys().pepper().is_empty() {
            self.refresh_keys(true).await.map_err(internal)?;
        }
        let secret = format!("{PREFIX}{}", hex::encode(random::<32>()?));
        let key = ApiKey {
            id,
            tenant: new.tenant.clone(),
            name: new.name.clone(),
            hash: hex::encode(hash(&self.keys().pepper(), secret.as_bytes())),
            hint: secret[..PREFIX.len() + 6].to_owned(),
            settings: serde_json::to_string(&settings).map_err(internal)?,
            expires_ms,
            created_ms: now_ms(),
            revoked_ms: None,
            last_used_ms: None,
        };
        let detail = json!({"name": key.name, "tenant": key.tenant, "settings": settings});
        self.put(&key, actor, "created", detail).await?;
        let mut shown = self.shown(&*self.known_key(&key.id)?).await?;
        shown["key"] = Value::from(secret);
        Ok(shown)
    }

    /// `GET /v1/keys`: every key, no secret.
    pub async fn list_keys(&self) -> Result<Value, GatewayError> {
        self.key_log()?;
        let mut data = Vec::new();
        for entry in self.keys().all() {
            data.push(self.shown(&entry).await?);
        }
        Ok(json!({"object": "list", "data": data}))
    }

    /// `GET /v1/keys/{id}`.
    pub async fn key(&self, id: &str) -> Result<Value, GatewayError> {
        self.key_log()?;
        self.shown(&*self.known_key(id)?).await
    }

    /// `PATCH /v1/keys/{id}`: its name, limits, allowed providers and
    /// models, expiry or metadata; a revoked key is not changed.
    pub async fn patch_key(
        &self,
        actor: &Caller,
        id: &str,
        patch: KeyPatch,
    ) -> Result<Value, GatewayError> {
        self.key_log()?;
        let entry = self.known_key(id)?;
        if entry.record.revoked_ms.is_some() {
            return Err(GatewayError::Conflict(format!("API key {id:?} is revoked")));
        }
        let name = patch
            .name
            .clone()
            .unwrap_or_else(|| entry.record.name.clone());
        check_name(&name, &entry.record.tenant)?;
        let settings = patch.apply(entry.settings.clone());
        let known: Vec<&str> = self.admin().host.providers().names().collect();
        check(&settings, &format!("{}~{id}", entry.record.tenant), &known)?;
        let expires_ms = match &patch.expires_at {
            Some(at) => expiry(at.as_deref())?,
            None => entry.record.expires_ms,
        };
        let key = ApiKey {
            name,
            settings: serde_json::to_string(&settings).map_err(internal)?,
            expires_ms,
            ..entry.record.clone()
        };
        let detail = json!({"name": key.name, "settings": settings, "expiresAt": time(expires_ms)});
        self.put(&key, actor, "updated", detail).await?;
        self.shown(&*self.known_key(id)?).await
    }

    /// `DELETE /v1/keys/{id}`: revoked, on every host within a refresh.
    pub async fn revoke_key(&self, actor: &Caller, id: &str) -> Result<Value, GatewayError> {
        self.key_log()?;
        let entry = self.known_key(id)?;
        if entry.record.revoked_ms.is_none() {
            let key = ApiKey {
                revoked_ms: Some(now_ms()),
                ..entry.record.clone()
            };
            self.put(&key, actor, "revoked", json!({})).await?;
        }
        self.shown(&*self.known_key(id)?).await
    }

    /// `GET /v1/keys/{id}/events`: its audit list, the oldest first.
    pub async fn key_events(&self, id: &str) -> Result<Value, GatewayError> {
        let log = self.key_log()?;
        self.known_key(id)?;
        let events = log.api_key_events(id).await.map_err(internal)?;
        let data: Vec<Value> = events
            .into_iter()
            .map(|e| {
                json!({"at": time(Some(e.at_ms)), "actor": e.actor, "action": e.action,
                       "detail": serde_json::from_str::<Value>(&e.detail).unwrap_or(Value::Null)})
            })
            .collect();
        Ok(json!({"object": "list", "data": data}))
    }

    /// A key as the API shows it: no secret, its state, and its own limits
    /// each in its current window.
    async fn shown(&self, entry: &KeyEntry) -> Result<Value, GatewayError> {
        let r = &entry.record;
        let now = now_ms();
        let status = match (r.revoked_ms, entry.live(now)) {
            (Some(_), _) => "revoked",
            (None, false) => "expired",
            (None, true) => "active",
        };
        let owner = format!("{}~{}", r.tenant, r.id);
        let mut spend = Vec::new();
        if let Some(ledger) = self.keys().setup.get().and_then(|s| s.log.ledger()) {
            for limit in &entry.settings.limits {
                spend.push(limit_answer(ledger, &Plan::of_limit(&owner, limit)).await?);
            }
        }
        let s = &entry.settings;
        Ok(json!({
            "id": r.id, "object": "api_key", "name": r.name, "tenant": r.tenant,
            "hint": format!("{}…", r.hint), "status": status,
            "limits": s.limits, "allowedProviders": s.allowed_providers,
            "allowedModels": s.allowed_models, "metadata": s.metadata,
            "expiresAt": time(r.expires_ms), "createdAt": time(Some(r.created_ms)),
            "revokedAt": time(r.revoked_ms), "lastUsedAt": time(entry.last_used_ms()),
            "spend": spend,
        }))
    }
}

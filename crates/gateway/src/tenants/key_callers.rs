//! The callers API keys are: each key of the run log made into a
//! [`Tenant`] of its own (its tenant's name, host and limits, narrowed and
//! added to by the key's), and the refresh that keeps this host's table of
//! them fresh.

use super::allotment::Holder;
use super::caller::Tenant;
use super::keys::{KeyEntry, KeySettings, KeySetup};
use super::limited::Limited;
use super::plan::Plan;
use super::registry::Tenants;
use callai_engine::runlog::{ApiKey, RunLogError};
use std::sync::{Arc, OnceLock};

impl Tenants {
    /// Reads the keys again if the run log's generation moved on (or
    /// `force`), and writes when keys were last used here. Whether it read
    /// them.
    pub async fn refresh_keys(&self, force: bool) -> Result<bool, RunLogError> {
        self.keys()
            .refresh(force, |record, setup| self.key_entry(record, setup))
            .await
    }

    /// The caller a key's requests are: its tenant (of the config, or one
    /// of its own), its providers narrowed by the key's, its limits the
    /// tenant's and the key's.
    fn key_entry(&self, record: ApiKey, setup: &KeySetup) -> KeyEntry {
        let settings: KeySettings = serde_json::from_str(&record.settings).unwrap_or_default();
        let base = self.by_name(&record.tenant);
        let mut host = match base {
            Some(base) => base.host.clone(),
            None => self.admin().host.owned_by(&record.tenant),
        };
        if let Some(allowed) = &settings.allowed_providers {
            host = host.narrowed_to(allowed);
        }
        let owner = format!("{}~{}", record.tenant, record.id);
        let own: Vec<Plan> = settings
            .limits
            .iter()
            .map(|l| Plan::of_limit(&owner, l))
            .collect();
        let holder = Holder {
            owner: &setup.owner,
            ttl: setup.ttl,
            metrics: setup.metrics.clone(),
        };
        let limited = Limited::joined(
            base.and_then(|b| b.limited.get()).map(|l| &**l),
            &setup.log,
            &record.tenant,
            &own,
            &holder,
            setup.queue,
        );
        let plans = base
            .map(|b| b.plans.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(own)
            .collect();
        let tenant = Tenant {
            name: record.tenant.clone(),
            host,
            plans,
            limited: limited.map(OnceLock::from).unwrap_or_default(),
            allowed_models: settings.allowed_models.clone(),
        };
        KeyEntry::new(record, settings, Arc::new(tenant))
    }
}

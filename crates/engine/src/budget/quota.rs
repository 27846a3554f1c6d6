//! A provider's quota (`[providers.NAME.limits]`: requests and tokens a
//! minute, across every host on one run log): the host does not send a
//! provider more than it allows, instead of learning it from the
//! provider's 429s. Each request is held to it on its own, unlike a
//! budget, which holds a whole call: before it is sent its worst case (one
//! request, its `maxTokens` out, its input's bound in) is reserved on its
//! provider's quota, and once it ends what it really spent is charged.
//!
//! A request the quota has no room for is held back
//! ([`FailureKind::Throttled`](crate::provider::FailureKind)): the next
//! target of its chain takes it at once; at the chain's end it waits for
//! room (as long as the quota lets it) and is then refused, the call's
//! error naming the quota ([`quota_exceeded`]).
//!
//! Where the quota is kept (a run log's database) is the
//! [`ProviderQuota`]'s business; the engine only asks and tells.

use super::{Refusal, Reservation, ReserveError, Spend, shown};
use crate::provider::BoxFuture;
use callai_wire::{CallError, ErrorCode};
use std::collections::HashMap;
use std::sync::Arc;

/// One provider's quota.
pub trait ProviderQuota: Send + Sync {
    /// Reserves `worst` for one request, or refuses it. With `wait`, a
    /// request that does not fit waits for room first, as long as the
    /// quota lets a request wait; without, it is refused at once (another
    /// target may take it).
    fn reserve(&self, worst: Spend, wait: bool)
    -> BoxFuture<'_, Result<Reservation, ReserveError>>;

    /// Charges `spent` against `reservation` and releases the rest; runs
    /// to its end when spawned, so it owns what it needs.
    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()>;
}

/// Every provider's quota, by the provider's name; most have none.
#[derive(Clone, Default)]
pub struct Quotas {
    by_provider: HashMap<String, Arc<dyn ProviderQuota>>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_provider.keys()).finish()
    }
}

impl Quotas {
    /// No quota at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `quota` for `provider`'s requests.
    pub fn with(mut self, provider: &str, quota: Arc<dyn ProviderQuota>) -> Self {
        self.by_provider.insert(provider.to_owned(), quota);
        self
    }

    /// `provider`'s quota, when it has one.
    pub fn get(&self, provider: &str) -> Option<&Arc<dyn ProviderQuota>> {
        self.by_provider.get(provider)
    }

    /// Whether no provider has a quota.
    pub fn is_empty(&self) -> bool {
        self.by_provider.is_empty()
    }
}

/// The error of a call whose request `provider`'s quota refused, with no
/// other target to take it: `provider_unavailable` (the host gave up on
/// the provider for now), `details.reason = "provider_quota"`, the
/// provider, the quota's key (`requests`, `tokens`, `inputTokens`,
/// `outputTokens`), its limit and window, what is left, what the request
/// needs, and when the window resets. `callai serve` answers it 429.
pub fn quota_exceeded(provider: &str, refusal: &Refusal) -> CallError {
    let key = refusal.key;
    let per = refusal.per.as_str();
    let mut message = format!(
        "provider {provider:?} is at its quota ([providers.{provider}.limits] {key} = {} per {per}): \
         the request needs up to {} {key}, {} is left",
        refusal.limit, refusal.needed, refusal.left
    );
    let resets_at = refusal.resets_at_ms.map(super::rfc3339);
    if let Some(at) = &resets_at {
        message.push_str(&format!("; it resets at {at}"));
    }
    let e = CallError::new(ErrorCode::ProviderUnavailable, message)
        .with_detail("reason", "provider_quota")
        .with_detail("provider", provider)
        .with_detail("quota", key)
        .with_detail("limit", shown(key, refusal.limit))
        .with_detail("per", per)
        .with_detail("left", refusal.left)
        .with_detail("needed", refusal.needed);
    match resets_at {
        Some(at) => e.with_detail("resetsAt", at),
        None => e,
    }
}

/// A request's room in its provider's quota, held from before it is sent
/// until it ends; when the call is dropped first, charged at its worst
/// (the request may have reached the provider).
pub(crate) struct QuotaHeld {
    quota: Arc<dyn ProviderQuota>,
    reservation: Option<Reservation>,
    worst: Spend,
}

impl QuotaHeld {
    /// Reserves `worst` on `quota` (waiting for room with `wait`).
    pub(crate) async fn take(
        quota: &Arc<dyn ProviderQuota>,
        worst: Spend,
        wait: bool,
    ) -> Result<Self, ReserveError> {
        let reservation = quota.reserve(worst, wait).await?;
        Ok(Self {
            quota: quota.clone(),
            reservation: Some(reservation),
            worst,
        })
    }

    /// The request ended having spent `spent`: charged, the rest released.
    pub(crate) fn settle(mut self, spent: Spend) {
        if let Some(reservation) = self.reservation.take() {
            spawn(self.quota.settle(reservation, spent));
        }
    }
}

impl Drop for QuotaHeld {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            spawn(self.quota.settle(reservation, self.worst));
        }
    }
}

fn spawn(settle: BoxFuture<'static, ()>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(settle);
    }
}

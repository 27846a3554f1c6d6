//! Each provider's quota (`[providers.NAME.limits]`), kept on the run log's
//! ledger as a tenant's limits are: chunked allotments of a minute's
//! requests and tokens shared by every host on one database, so that
//! together they never send a provider more than its quota. The engine
//! holds each request to its provider's ([`callai_engine::budget::Quotas`]);
//! here is where they live.

use crate::tenants::{Holder, Limited, Plan};
use callai_engine::budget::{
    Limits, ProviderQuota, Quotas, Reservation, ReserveError, Spend, Window,
};
use callai_engine::{BoxFuture, RunLog};
use prometheus_client::metrics::counter::Counter;
use std::sync::Arc;
use std::time::Duration;

/// One provider's quota a minute, as its `[providers.NAME.limits]` says;
/// each unset key unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaPlan {
    /// The provider.
    pub provider: String,
    /// Requests a minute.
    pub requests: Option<u64>,
    /// Input and output tokens together, a minute.
    pub tokens: Option<u64>,
    /// Input tokens a minute.
    pub input_tokens: Option<u64>,
    /// Output tokens a minute.
    pub output_tokens: Option<u64>,
}

impl QuotaPlan {
    /// Its limits as the ledger keeps them: requests and tokens apart on
    /// one account (`providers/NAME/1m`, a name no tenant can have), tokens
    /// together on another (`providers/NAME/tokens/1m`).
    fn plans(&self) -> Vec<Plan> {
        let minute = |account: String, limits: Limits, tokens_together| Plan {
            limits,
            window: Window::Minute,
            currency: "".into(),
            account: account.into(),
            tokens_together,
        };
        let apart = Limits {
            requests: self.requests,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost: None,
        };
        let mut plans = Vec::with_capacity(2);
        if apart != Limits::default() {
            plans.push(minute(
                format!("providers/{}/1m", self.provider),
                apart,
                false,
            ));
        }
        if let Some(tokens) = self.tokens {
            let together = Limits {
                output_tokens: Some(tokens),
                ..Limits::default()
            };
            let account = format!("providers/{}/tokens/1m", self.provider);
            plans.push(minute(account, together, true));
        }
        plans
    }
}

/// One provider's quota, for the engine.
struct Quota {
    limited: Arc<Limited>,
    refused: Counter,
}

impl ProviderQuota for Quota {
    fn reserve(
        &self,
        worst: Spend,
        wait: bool,
    ) -> BoxFuture<'_, Result<Reservation, ReserveError>> {
        let queue = if wait {
            self.limited.queue()
        } else {
            Duration::ZERO
        };
        Box::pin(async move {
            let reserved = self.limited.reserve_within(worst, queue).await;
            if matches!(reserved, Err(ReserveError::Refused(_))) {
                self.refused.inc();
            }
            reserved
        })
    }

    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()> {
        use callai_engine::budget::Budget;
        self.limited.settle(reservation, spent)
    }
}

/// The quotas of `plans` on `log`, held by `holder`; a request at its
/// chain's end waits up to `queue` for room.
pub fn quotas_of(
    plans: &[QuotaPlan],
    log: &Arc<dyn RunLog>,
    holder: &Holder<'_>,
    queue: Duration,
) -> Quotas {
    let mut quotas = Quotas::new();
    for plan in plans {
        let owner = format!("provider {}", plan.provider);
        let Some(limited) = Limited::quota(log, &owner, &plan.plans(), holder, queue) else {
            continue;
        };
        let quota = Quota {
            limited,
            refused: holder.metrics.quota_refusals(&plan.provider),
        };
        quotas = quotas.with(&plan.provider, Arc::new(quota));
    }
    quotas
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::budget::Spend;

    #[test]
    fn tokens_together_are_one_account_and_the_others_another() {
        let plan = QuotaPlan {
            provider: "p".into(),
            requests: Some(10),
            tokens: Some(1000),
            ..QuotaPlan::default()
        };
        let plans = plan.plans();
        assert_eq!(plans.len(), 2);
        assert_eq!(&*plans[0].account, "providers/p/1m");
        assert_eq!(plans[0].limits.requests, Some(10));
        assert_eq!(&*plans[1].account, "providers/p/tokens/1m");
        let spend = Spend {
            requests: 1,
            output_tokens: 30,
            input_tokens: 12,
            cost: 0,
        };
        assert_eq!(plans[1].counted(spend).output_tokens, 42);
        assert_eq!(plans[1].counted(spend).input_tokens, 0);
        assert_eq!(plans[0].counted(spend), spend);
        assert_eq!(plans[1].key_said("outputTokens"), "tokens");
        let only_tokens = QuotaPlan {
            provider: "p".into(),
            tokens: Some(5),
            ..QuotaPlan::default()
        };
        assert_eq!(only_tokens.plans().len(), 1);
    }
}

//! The store of call traces: the newest `[server] keepCalls` in memory,
//! and every one in the run log when there is one (written in batches,
//! pruned with its runs); found by id and listed by filter, owner-scoped.

use super::kept::Kept;
use super::logged::TraceWriter;
use super::record::CallTrace;
use super::text::TraceText;
use callai_engine::RunLog;
use callai_engine::runlog::{MinuteSums, RunLogError, TracePage, TraceQuery, TraceTag};
use std::sync::{Arc, Mutex};

/// The traces kept, oldest first; past `keep`, or past `max_text` bytes
/// of their text, the oldest goes.
#[derive(Debug)]
pub struct CallStore {
    keep: usize,
    max_text: u64,
    /// What its traces keep of their calls' text.
    text: TraceText,
    inner: Mutex<Kept>,
    /// The run log's writer, when traces are kept there too.
    log: Option<TraceWriter>,
}

/// A call found by id: kept in memory, or read back from the run log as
/// the JSON it was written as.
#[derive(Debug)]
pub enum Found {
    /// In memory.
    Kept(Arc<CallTrace>),
    /// In the run log.
    Logged(String),
}

/// A page of calls, newest first, and whether there are older ones.
#[derive(Debug)]
pub enum Listed {
    /// From memory.
    Kept(Vec<Arc<CallTrace>>, bool),
    /// From the run log: each call's id and JSON.
    Logged(TracePage),
}

/// What `GET /v1/calls` keeps to.
#[derive(Debug, Default, Clone)]
pub struct CallFilter {
    /// The owner: a tenant's own, or (the admin, unset) every tenant's.
    pub tenant: Option<String>,
    /// Calls with a request to this provider.
    pub provider: Option<String>,
    /// Calls with a request for this model, or routing this model name.
    pub model: Option<String>,
    /// `call`, `chat_completions`, `messages`, `responses` or `run`.
    pub endpoint: Option<String>,
    /// The calls of this pack run.
    pub run: Option<String>,
    /// `ok`, or an error code.
    pub outcome: Option<String>,
    /// Only calls of more than one attempt.
    pub retried: bool,
    /// Only calls started at or after this time (ms since the Unix epoch).
    pub since_ms: Option<u64>,
}

impl CallFilter {
    fn admits(&self, t: &CallTrace) -> bool {
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        is(&self.tenant, &t.tenant)
            && is(&self.endpoint, t.endpoint)
            && is(&self.outcome, t.outcome)
            && self
                .run
                .as_deref()
                .is_none_or(|r| t.run_id.as_deref() == Some(r))
            && self
                .provider
                .as_deref()
                .is_none_or(|p| t.requests.iter().any(|r| r.provider == p))
            && self.model.as_deref().is_none_or(|m| {
                t.route.as_deref() == Some(m) || t.requests.iter().any(|r| r.model == m)
            })
            && (!self.retried || t.attempts.count > 1)
            && self.since_ms.is_none_or(|s| t.started_ms >= s)
    }

    /// The run log's query of a page of what it admits.
    fn query(&self, before: Option<&str>, limit: usize) -> TraceQuery {
        // The first tag is the one the page is read through: the one that
        // likely admits fewest calls first (a run's, a tenant's), the one
        // most calls share (`outcome=ok`) last.
        let tags = [
            self.run.as_deref().map(TraceTag::Run),
            self.tenant.as_deref().map(TraceTag::Tenant),
            self.model.as_deref().map(TraceTag::Model),
            self.provider.as_deref().map(TraceTag::Provider),
            self.endpoint.as_deref().map(TraceTag::Endpoint),
            self.outcome.as_deref().map(TraceTag::Outcome),
        ];
        TraceQuery {
            tags: tags.iter().flatten().map(TraceTag::key).collect(),
            retried: self.retried,
            since_ms: self.since_ms,
            before: before.map(str::to_owned),
            owner: self.tenant.clone(),
            limit,
        }
    }
}

impl CallStore {
    /// A store of the newest `keep` traces, keeping `text` of each call
    /// (none at all when it keeps no trace).
    pub fn new(keep: usize, text: TraceText) -> Self {
        Self {
            keep,
            max_text: u64::MAX,
            text: if keep == 0 { TraceText::Unkept } else { text },
            inner: Mutex::new(Kept::default()),
            log: None,
        }
    }

    /// The store the config asks for: `[server] keepCalls` (`keep`)
    /// traces holding at most `keepTextBytes` (`max_text`) of text, keeping
    /// text as `[runlog] keepText` says, and each also in `runlog` when
    /// given (unless `keep` is 0: no trace at all). Spawns the log's writer
    /// on the current tokio runtime.
    pub fn of(
        keep: usize,
        max_text: u64,
        keep_text: bool,
        runlog: Option<&Arc<dyn RunLog>>,
    ) -> Self {
        let mut store = Self::new(keep, TraceText::of(keep_text));
        store.max_text = max_text;
        if store.keep > 0 {
            store.log = runlog.and_then(|log| TraceWriter::spawn(log.clone()));
        }
        store
    }

    /// Waits until every trace kept before it is in the run log; or says
    /// why some are not.
    pub async fn flush(&self) -> Result<(), String> {
        match &self.log {
            Some(log) => log.flush().await,
            None => Ok(()),
        }
    }

    /// Call `id`, when `tenant` may see it (`None`: the admin, any): from
    /// memory, else from the run log.
    pub async fn find(&self, tenant: Option<&str>, id: &str) -> Result<Option<Found>, RunLogError> {
        if let Some(kept) = self.get(tenant, id) {
            return Ok(Some(Found::Kept(kept)));
        }
        let Some(log) = &self.log else {
            return Ok(None);
        };
        // Written or not, the others waiting do not hide one that is.
        let flushed = log.flush().await;
        match log.log().get_trace(tenant, id).await? {
            Some(json) => Ok(Some(Found::Logged(json))),
            None => flushed.map(|()| None).map_err(RunLogError::Storage),
        }
    }

    /// Up to `limit` calls `filter` admits, newest first, older than the
    /// call `before` when given: from the run log when there is one (every
    /// call it kept, not only the newest `keepCalls`), else from memory.
    pub async fn page(
        &self,
        filter: &CallFilter,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Listed, RunLogError> {
        let Some(log) = &self.log else {
            let (page, more) = self.list(filter, before, limit);
            return Ok(Listed::Kept(page, more));
        };
        // A page without the calls the log has not taken yet would be
        // wrong without saying so: the listing fails, naming why.
        log.flush().await.map_err(RunLogError::Storage)?;
        let query = filter.query(before, limit);
        Ok(Listed::Logged(log.log().list_traces(&query).await?))
    }

    /// The sums of the minutes from `since_ms` (a minute's start) on, of
    /// `tenant`'s calls (`None`: every tenant's), from the run log (every
    /// host's calls, kept across restarts); `None` without one.
    pub async fn minute_sums(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
    ) -> Result<Option<MinuteSums>, RunLogError> {
        let Some(log) = &self.log else {
            return Ok(None);
        };
        // As a listing: sums without the calls not written yet would be
        // wrong without saying so.
        log.flush().await.map_err(RunLogError::Storage)?;
        log.log().minute_sums(tenant, since_ms).await.map(Some)
    }

    /// What its traces keep of their calls' text.
    pub fn text(&self) -> TraceText {
        self.text
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic under the lock (a reader's closure, say) leaves the
        // traces whole: they change only in `Kept::keep`, which calls
        // nothing that panics short of aborting. Go on with them.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `trace`, dropping the oldest past the bound.
    pub fn record(&self, trace: CallTrace) {
        if self.keep == 0 {
            return;
        }
        let (trace, stale) = self.kept().keep(trace, self.keep, self.max_text);
        drop(stale);
        if let Some(log) = &self.log {
            log.send(trace);
        }
    }

    /// Call `id`, when `tenant` may see it (`None`: the admin, any).
    pub fn get(&self, tenant: Option<&str>, id: &str) -> Option<Arc<CallTrace>> {
        let found = self.kept().by_id.get(id).cloned()?;
        tenant.is_none_or(|t| t == found.tenant).then_some(found)
    }

    /// Calls `each` with every kept trace `tenant` may see (`None`: the
    /// admin, all) that started at or after `since_ms`, newest first.
    pub fn each_since(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
        mut each: impl FnMut(&Arc<CallTrace>),
    ) {
        let kept = self.kept();
        // Kept in the order they ended: past the first that ended before
        // `since_ms`, every older one started before it too.
        let recent = kept
            .order
            .iter()
            .rev()
            .take_while(|t| t.started_ms + t.duration_ms >= since_ms);
        recent
            .filter(|t| t.started_ms >= since_ms && tenant.is_none_or(|n| n == t.tenant))
            .for_each(&mut each);
    }

    /// Up to `limit` traces `filter` admits, newest first, older than the
    /// call `before` when given; and whether there are more.
    pub fn list(
        &self,
        filter: &CallFilter,
        before: Option<&str>,
        limit: usize,
    ) -> (Vec<Arc<CallTrace>>, bool) {
        let kept = self.kept();
        let mut newest_first = kept.order.iter().rev();
        if let Some(before) = before {
            // Skip to the call named, then past it: a call of the caller's
            // own (another's is a place in no list of its).
            let owned = |t: &CallTrace| filter.tenant.as_deref().is_none_or(|o| o == t.tenant);
            if !newest_first.by_ref().any(|t| t.id == before && owned(t)) {
                return (Vec::new(), false);
            }
        }
        let mut page: Vec<Arc<CallTrace>> = Vec::with_capacity(limit.min(kept.order.len()));
        let mut more = false;
        for t in newest_first.filter(|t| filter.admits(t)) {
            if page.len() == limit {
                more = true;
                break;
            }
            page.push(t.clone());
        }
        (page, more)
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::fresh_id;
    use smol_str::SmolStr;

    /// A trace's id and the store's copy of it are inline (the store keeps
    /// a trace in one allocation; see `record.rs`).
    #[test]
    fn a_call_id_is_kept_inline() {
        let id = SmolStr::from(fresh_id("call_"));
        assert_eq!(id.len(), 21, "{id}");
        assert!(!id.is_heap_allocated(), "{id}");
    }
}

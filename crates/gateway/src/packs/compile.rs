//! Compiling a pack: once per content hash (a cell per hash in the
//! table), off the async workers, at most `[server] maxCompiles` at once,
//! with what can be refused without compiling (not a pack's shape, a
//! function or the code too large) refused before a turn is waited for.

use super::store::{PackStore, Precheck};
use crate::error::GatewayError;
use callai_host::{LoadError, Pack};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::OnceCell;

impl PackStore {
    pub(super) fn cell(&self, sha256: &str) -> Arc<OnceCell<Pack>> {
        self.compiled
            .lock()
            .expect("compiled table")
            .entry(sha256.to_owned())
            .or_default()
            .clone()
    }

    pub(super) async fn compile(
        &self,
        sha256: &str,
        bytes: Arc<[u8]>,
        precheck: Precheck,
    ) -> Result<Pack, GatewayError> {
        let cell = self.cell(sha256);
        let result = cell
            .get_or_try_init(|| self.compile_now(bytes, precheck))
            .await
            .cloned();
        if result.is_err() {
            // A failed compile leaves nothing behind under that hash.
            self.compiled.lock().expect("compiled table").remove(sha256);
        }
        result
    }

    /// What can be refused of `bytes` without compiling them (not a pack's
    /// shape, too large a function or too much code), on the blocking pool
    /// (it reads every byte).
    pub(super) async fn precheck(&self, bytes: Arc<[u8]>) -> Result<(), GatewayError> {
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime.check(&bytes))
            .await
            .map_err(|e| GatewayError::internal(format!("the check task failed: {e}")))?
            .map_err(refusal)
    }

    /// Compiles on the blocking pool (a large component takes seconds),
    /// once it has a turn: at most `maxCompiles` at once. What can be
    /// refused without compiling is refused before waiting for a turn.
    pub(super) async fn compile_now(
        &self,
        bytes: Arc<[u8]>,
        precheck: Precheck,
    ) -> Result<Pack, GatewayError> {
        if precheck == Precheck::Needed {
            self.precheck(bytes.clone()).await?;
        }
        self.compiles.waiting.fetch_add(1, Ordering::Relaxed);
        let turn = self.compile_turns.acquire().await;
        self.compiles.waiting.fetch_sub(1, Ordering::Relaxed);
        let _turn = turn.expect("the compile semaphore is never closed");
        self.compiles.running.fetch_add(1, Ordering::Relaxed);
        let runtime = self.runtime.clone();
        let task = tokio::task::spawn_blocking(move || runtime.load(&bytes));
        let result = task.await;
        self.compiles.running.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(Ok(pack)) => Ok(pack),
            Ok(Err(e)) => Err(refusal(e)),
            Err(e) => Err(GatewayError::internal(format!(
                "the compile task failed: {e}"
            ))),
        }
    }
}

/// Why a component was refused.
fn refusal(error: LoadError) -> GatewayError {
    match error {
        LoadError::FunctionTooLarge { key, .. } | LoadError::CodeTooLarge { key, .. } => {
            GatewayError::TooLarge {
                key,
                message: error.to_string(),
            }
        }
        e => GatewayError::invalid(
            "body",
            format!("not a pack component this host can run: {e:#}"),
        ),
    }
}

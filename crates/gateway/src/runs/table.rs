//! The runs in memory: every one going on, and the recent finished ones
//! (`[server] keepRuns`), by tenant and id. A run log, when set, holds the
//! rest.

use super::entry::RunEntry;
use crate::error::GatewayError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The runs in memory: every one going on, and the last `keep` finished.
#[derive(Debug)]
pub struct RunTable {
    inner: Mutex<Table>,
}

/// A run's key in the table: its tenant and id.
type Key = (String, String);

fn key_of(entry: &RunEntry) -> Key {
    (entry.tenant.clone(), entry.run_id.clone())
}

#[derive(Debug)]
struct Table {
    runs: HashMap<Key, Arc<RunEntry>>,
    finished: VecDeque<Key>,
    keep: usize,
}

impl RunTable {
    /// Keeps `keep` finished runs.
    pub fn new(keep: usize) -> Self {
        Self {
            inner: Mutex::new(Table {
                runs: HashMap::new(),
                finished: VecDeque::new(),
                keep,
            }),
        }
    }

    /// Adds a run; a run its tenant already holds on this server is a
    /// conflict.
    pub fn insert(&self, entry: Arc<RunEntry>) -> Result<(), GatewayError> {
        let mut t = self.inner.lock().expect("run table");
        let key = key_of(&entry);
        if t.runs.contains_key(&key) {
            return Err(GatewayError::conflict(format!(
                "run {:?} already exists on this host",
                entry.run_id
            )));
        }
        t.runs.insert(key, entry);
        Ok(())
    }

    /// Adds a run, or replaces the one of its key (a run this host held
    /// before, taken over again).
    pub fn put(&self, entry: Arc<RunEntry>) {
        let mut t = self.inner.lock().expect("run table");
        t.runs.insert(key_of(&entry), entry);
    }

    /// Forgets a run that never started (its admission was refused).
    pub fn remove(&self, entry: &RunEntry) {
        let key = key_of(entry);
        let mut t = self.inner.lock().expect("run table");
        if t.runs
            .get(&key)
            .is_some_and(|held| std::ptr::eq(&**held, entry))
        {
            t.runs.remove(&key);
        }
    }

    /// A run has ended: it is kept until `keep` newer ones have.
    pub fn finished(&self, entry: &RunEntry) {
        let mut t = self.inner.lock().expect("run table");
        t.finished.push_back(key_of(entry));
        while t.finished.len() > t.keep {
            if let Some(old) = t.finished.pop_front() {
                t.runs.remove(&old);
            }
        }
    }

    /// Run `run_id` of `tenant`, if this server holds it.
    pub fn get(&self, tenant: &str, run_id: &str) -> Option<Arc<RunEntry>> {
        let key = (tenant.to_owned(), run_id.to_owned());
        self.inner
            .lock()
            .expect("run table")
            .runs
            .get(&key)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_keeps_the_newest_finished_runs() {
        let table = RunTable::new(2);
        for i in 0..4 {
            let id = format!("r{i}");
            let entry = Arc::new(RunEntry::new("a".into(), id, "p".into(), "n".into()));
            table.insert(entry.clone()).unwrap();
            table.finished(&entry);
        }
        assert!(table.get("a", "r0").is_none() && table.get("a", "r1").is_none());
        assert!(table.get("a", "r2").is_some() && table.get("a", "r3").is_some());
        let again = Arc::new(RunEntry::new(
            "a".into(),
            "r3".into(),
            "p".into(),
            "n".into(),
        ));
        assert!(matches!(
            table.insert(again).unwrap_err(),
            GatewayError::Conflict(_)
        ));
        // Run ids are unique per owner: another tenant's r3 is its own.
        let theirs = Arc::new(RunEntry::new(
            "b".into(),
            "r3".into(),
            "p".into(),
            "n".into(),
        ));
        table.insert(theirs).unwrap();
        assert!(table.get("b", "r3").is_some() && table.get("c", "r3").is_none());
    }
}

//! Uploads into a caller's namespace and their deletion: the names a
//! tenant may use, one upload at a time per namespace, and the room the
//! server keeps for them.

use super::source::PackSource;
use super::store::{
    MAX_UPLOADS, MAX_UPLOADS_PER_TENANT, Named, PackInfo, PackStore, Precheck, namespace,
    valid_name,
};
use crate::error::GatewayError;
use crate::ids::{NODE_ID_RULE, valid_node_id};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl PackStore {
    /// Stores `tenant`'s upload in its namespace (the admin's: the shared
    /// one): refused when `name` is not a valid name, is a bundled or
    /// `--packs` pack, is shared and the uploader a tenant, or `bytes` is
    /// no component.
    pub async fn upload(
        &self,
        tenant: &str,
        name: &str,
        node_id: Option<String>,
        bytes: Vec<u8>,
    ) -> Result<PackInfo, GatewayError> {
        if !valid_name(name) {
            return Err(GatewayError::invalid(
                "name",
                format!("{name:?} cannot name a pack: use 1 to 128 letters, digits, '.', '_', '-'"),
            ));
        }
        if let Some(node_id) = &node_id
            && !valid_node_id(node_id)
        {
            return Err(GatewayError::invalid("nodeId", NODE_ID_RULE));
        }
        let ns = namespace(tenant);
        let key: Named = (ns.clone(), name.to_owned());
        self.may_upload(&key)?;
        let bytes: Arc<[u8]> = bytes.into();
        let sha256 = callai_host::sha256_hex(&bytes);
        // What the bytes say is refused before any wait: a component that
        // cannot be a pack, or would cost too much to compile, takes no
        // turn.
        self.precheck(bytes.clone()).await?;
        {
            // A tenant's uploads queue for a compile one at a time, so that
            // no tenant holds more than one place in the queue; waiting for
            // that turn is waiting for a compile too.
            let turn = self.upload_turn(&ns);
            self.compiles.waiting.fetch_add(1, Ordering::Relaxed);
            let _turn = turn.lock().await;
            self.compiles.waiting.fetch_sub(1, Ordering::Relaxed);
            self.compile(&sha256, bytes.clone(), Precheck::Done).await?;
        }
        let info = PackInfo {
            name: name.to_owned(),
            tenant: ns,
            node_id: node_id.unwrap_or_else(|| name.to_owned()),
            sha256,
            default_script: None,
            source: PackSource::Upload(bytes),
        };
        let mut uploads = self.uploads.lock().expect("upload count");
        let mut table = self.by_name.write().expect("pack table");
        let is_new = !table.contains_key(&key);
        if is_new {
            if let Err(e) = room_for(&table, *uploads, &key) {
                drop(table);
                self.forget_unnamed(&info.sha256);
                return Err(e);
            }
            *uploads += 1;
        }
        let replaced = table.insert(key, info.clone());
        drop(table);
        drop(uploads);
        if let Some(old) = replaced
            && old.sha256 != info.sha256
        {
            self.forget_unnamed(&old.sha256);
        }
        Ok(info)
    }

    /// Whether an upload may go under `key`: a shared pack is the admin's
    /// to change (and a bundled or `--packs` one nobody's), and a new name
    /// needs room.
    fn may_upload(&self, key: &Named) -> Result<(), GatewayError> {
        let table = self.by_name.read().expect("pack table");
        let (ns, name) = key;
        if ns.is_some()
            && let Some(shared) = table.get(&(None, name.clone()))
        {
            let what = match shared.source {
                PackSource::Upload(_) => "the admin's",
                _ => "this server's own",
            };
            return Err(GatewayError::forbidden(
                format!(
                    "{name:?} is a shared pack ({what}), which tenants may run but not replace; \
                     upload under another name"
                ),
                Some("name"),
            ));
        }
        match table.get(key).map(|p| &p.source) {
            Some(PackSource::Upload(_)) => Ok(()),
            Some(_) => Err(GatewayError::conflict(format!(
                "{name:?} is a pack of this server's own (bundled or --packs); upload under another name"
            ))),
            None => room_for(&table, *self.uploads.lock().expect("upload count"), key),
        }
    }

    /// The lock a namespace's uploads take turns on.
    fn upload_turn(&self, ns: &Option<String>) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.upload_turns.lock().expect("upload turns");
        // Turns of namespaces with no upload going on are dropped.
        turns.retain(|_, t| Arc::strong_count(t) > 1);
        turns.entry(ns.clone()).or_default().clone()
    }

    /// Deletes `tenant`'s upload `name` (the admin's: a shared upload).
    /// A bundled or `--packs` pack cannot be deleted; a tenant deleting a
    /// shared name is refused; a name its namespace does not hold is 404,
    /// as one nobody holds.
    pub fn delete(&self, tenant: &str, name: &str) -> Result<PackInfo, GatewayError> {
        let ns = namespace(tenant);
        let key: Named = (ns.clone(), name.to_owned());
        let mut uploads = self.uploads.lock().expect("upload count");
        let mut table = self.by_name.write().expect("pack table");
        match table.get(&key).map(|p| &p.source) {
            Some(PackSource::Upload(_)) => {}
            Some(_) => {
                return Err(GatewayError::conflict(format!(
                    "{name:?} is a pack of this server's own (bundled or --packs); it cannot be deleted"
                )));
            }
            None if ns.is_some() && table.contains_key(&(None, name.to_owned())) => {
                return Err(GatewayError::forbidden(
                    format!("{name:?} is a shared pack, which tenants may run but not delete"),
                    None,
                ));
            }
            None => {
                return Err(GatewayError::not_found(format!(
                    "no pack {name:?} on this host"
                )));
            }
        }
        let gone = table.remove(&key).expect("looked up above");
        *uploads = uploads.saturating_sub(1);
        drop(table);
        drop(uploads);
        self.forget_unnamed(&gone.sha256);
        Ok(gone)
    }

    /// Drops the compiled pack of `sha256` from the table when no name
    /// holds it any more; runs holding it keep it until they end.
    fn forget_unnamed(&self, sha256: &str) {
        let named = self
            .by_name
            .read()
            .expect("pack table")
            .values()
            .any(|p| p.sha256 == sha256);
        if !named {
            self.compiled.lock().expect("compiled table").remove(sha256);
        }
    }
}

/// Whether a new upload under `key` fits: at most [`MAX_UPLOADS`] in all
/// (`uploads` now), and [`MAX_UPLOADS_PER_TENANT`] of a tenant's.
fn room_for(
    table: &BTreeMap<Named, PackInfo>,
    uploads: usize,
    key: &Named,
) -> Result<(), GatewayError> {
    if uploads >= MAX_UPLOADS {
        return Err(GatewayError::TooManyPacks(format!(
            "this server keeps at most {MAX_UPLOADS} uploaded packs"
        )));
    }
    if let Some(tenant) = &key.0 {
        let own = table
            .keys()
            .filter(|(ns, _)| ns.as_ref() == Some(tenant))
            .count();
        if own >= MAX_UPLOADS_PER_TENANT {
            return Err(GatewayError::TooManyPacks(format!(
                "tenant {tenant:?} has {own} uploaded packs, the most one tenant keeps \
                 ({MAX_UPLOADS_PER_TENANT}); replace or delete one"
            )));
        }
    }
    Ok(())
}

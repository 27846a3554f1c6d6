//! Whose things a request reaches. Every run, event and pack has an owner,
//! the tenant whose token made it; a caller reaches its own, and the admin
//! reaches any tenant's by naming it (`?tenant=NAME`). Another owner's run
//! or pack is answered exactly as one nobody holds, so that no id can be
//! probed.

use crate::config::is_tenant_name;
use crate::error::GatewayError;
use crate::tenants::Caller;

/// The owner a request acts for: the caller itself, or the tenant the
/// admin named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope(String);

impl Scope {
    /// The scope of `caller`'s request naming `tenant` (from `?tenant=`).
    /// Only the admin may name another tenant; anyone may name itself.
    pub fn of(caller: &Caller, tenant: Option<&str>) -> Result<Self, GatewayError> {
        match tenant {
            None => Ok(Self(caller.name().to_owned())),
            Some(name) if name == caller.name() => Ok(Self(name.to_owned())),
            Some(name) if caller.is_admin() => {
                if is_tenant_name(name) {
                    Ok(Self(name.to_owned()))
                } else {
                    Err(GatewayError::invalid(
                        "tenant",
                        format!("{name:?} cannot name a tenant"),
                    ))
                }
            }
            Some(_) => Err(GatewayError::forbidden(
                "only the admin token may name another tenant (?tenant=)",
                Some("tenant"),
            )),
        }
    }

    /// The tenant.
    pub fn tenant(&self) -> &str {
        &self.0
    }
}

/// The tenant whose calls `caller` reaches: its own; for the admin, the
/// tenant it names or (`None`) every one.
pub fn owner(caller: &Caller, named: Option<&str>) -> Result<Option<String>, GatewayError> {
    if caller.is_admin() && named.is_none() {
        return Ok(None);
    }
    Ok(Some(Scope::of(caller, named)?.tenant().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenants::{ADMIN, Tenant};
    use callai_engine::{Host, HostConfig};
    use std::sync::Arc;

    fn caller(name: &str) -> Caller {
        let host = Host::builder(HostConfig::default()).build().unwrap();
        Caller(Arc::new(Tenant {
            name: name.into(),
            host,
            plans: Vec::new(),
            limited: Default::default(),
            allowed_models: None,
        }))
    }

    #[test]
    fn a_tenant_reaches_its_own_and_the_admin_anyones() {
        let a = caller("a");
        assert_eq!(Scope::of(&a, None).unwrap().tenant(), "a");
        assert_eq!(Scope::of(&a, Some("a")).unwrap().tenant(), "a");
        let e = Scope::of(&a, Some("b")).unwrap_err();
        assert!(
            matches!(
                e,
                GatewayError::Forbidden {
                    field: Some("tenant"),
                    ..
                }
            ),
            "{e}"
        );
        let admin = caller(ADMIN);
        assert_eq!(Scope::of(&admin, None).unwrap().tenant(), ADMIN);
        assert_eq!(Scope::of(&admin, Some("b")).unwrap().tenant(), "b");
        let e = Scope::of(&admin, Some("a b")).unwrap_err();
        assert!(matches!(e, GatewayError::Invalid { .. }), "{e}");
        assert_eq!(owner(&admin, None).unwrap(), None);
        assert_eq!(owner(&a, None).unwrap().as_deref(), Some("a"));
    }
}

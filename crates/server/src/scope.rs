//! Whose things a request reaches. Every run, event and pack has an owner,
//! the tenant whose token made it; a caller reaches its own, and the admin
//! reaches any tenant's by naming it (`?tenant=NAME`). Another owner's run
//! or pack is answered exactly as one nobody holds, so that no id can be
//! probed.

use crate::error::{ApiCode, ApiError};
use crate::tenants::Caller;
use serde::Deserialize;

/// The `?tenant=` of a request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    /// The tenant whose things the admin means.
    pub tenant: Option<String>,
}

/// The owner a request acts for: the caller itself, or the tenant the
/// admin named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope(String);

impl Scope {
    /// The scope of `caller`'s request naming `tenant` (from `?tenant=`).
    /// Only the admin may name another tenant; anyone may name itself.
    pub fn of(caller: &Caller, tenant: Option<&str>) -> Result<Self, ApiError> {
        match tenant {
            None => Ok(Self(caller.name().to_owned())),
            Some(name) if name == caller.name() => Ok(Self(name.to_owned())),
            Some(name) if caller.is_admin() => {
                if crate::tenants::is_tenant_name(name) {
                    Ok(Self(name.to_owned()))
                } else {
                    Err(ApiError::invalid(
                        "tenant",
                        format!("{name:?} cannot name a tenant"),
                    ))
                }
            }
            Some(_) => Err(ApiError::new(
                ApiCode::Forbidden,
                "only the admin token may name another tenant (?tenant=)",
            )
            .with_detail("field", "tenant")),
        }
    }

    /// The tenant.
    pub fn tenant(&self) -> &str {
        &self.0
    }
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
            plan: None,
            allotment: Default::default(),
        }))
    }

    #[test]
    fn a_tenant_reaches_its_own_and_the_admin_anyones() {
        let a = caller("a");
        assert_eq!(Scope::of(&a, None).unwrap().tenant(), "a");
        assert_eq!(Scope::of(&a, Some("a")).unwrap().tenant(), "a");
        let e = Scope::of(&a, Some("b")).unwrap_err();
        assert_eq!(e.status().as_u16(), 403);
        let admin = caller(ADMIN);
        assert_eq!(Scope::of(&admin, None).unwrap().tenant(), ADMIN);
        assert_eq!(Scope::of(&admin, Some("b")).unwrap().tenant(), "b");
        assert_eq!(
            Scope::of(&admin, Some("a b"))
                .unwrap_err()
                .status()
                .as_u16(),
            400
        );
    }
}

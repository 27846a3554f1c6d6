//! The gateway's errors, mapped onto the API's: each kind of refusal or
//! failure to its code (and so its status), its message and details kept
//! as the gateway wrote them. A drop-in's layer then gives them its API's
//! shape.

use super::api::{ApiCode, ApiError};
use callai_gateway::GatewayError;

/// How long a client turned away by a full or stopping host is asked to
/// wait before trying again.
const RETRY_AFTER_SECONDS: u64 = 1;

impl From<GatewayError> for ApiError {
    fn from(error: GatewayError) -> Self {
        match error {
            GatewayError::Invalid { field, message } => Self::invalid(&field, message),
            GatewayError::Call(error) => Self::from_call(&error),
            GatewayError::NotFound(message) => Self::not_found(message),
            GatewayError::Conflict(message) => Self::conflict(message),
            GatewayError::Forbidden { message, field } => {
                let e = Self::new(ApiCode::Forbidden, message);
                match field {
                    Some(field) => e.with_detail("field", field),
                    None => e,
                }
            }
            GatewayError::TooLarge { key, message } => {
                Self::over_limit(ApiCode::PayloadTooLarge, key, message)
            }
            GatewayError::LimitExceeded { key, message } => {
                Self::over_limit(ApiCode::LimitExceeded, key, message)
            }
            GatewayError::Overloaded(message) => {
                Self::unavailable(ApiCode::Overloaded, message, RETRY_AFTER_SECONDS)
            }
            GatewayError::ShuttingDown(message) => {
                Self::unavailable(ApiCode::ShuttingDown, message, RETRY_AFTER_SECONDS)
            }
            GatewayError::TooManyPacks(message) => Self::new(ApiCode::TooManyPacks, message),
            GatewayError::Internal(message) => Self::internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn body(e: &ApiError) -> Value {
        serde_json::to_value(e.body::<()>(None)).unwrap()
    }

    #[test]
    fn the_gateways_errors_get_their_codes_statuses_and_retry_after() {
        let cases = [
            (
                GatewayError::invalid("runId", "bad"),
                400,
                "validation_error",
                None,
            ),
            (GatewayError::not_found("no run"), 404, "not_found", None),
            (GatewayError::conflict("taken"), 409, "conflict", None),
            (
                GatewayError::forbidden("no", Some("tenant")),
                403,
                "forbidden",
                None,
            ),
            (
                GatewayError::TooLarge {
                    key: "server.maxPackCodeBytes",
                    message: "big".into(),
                },
                413,
                "payload_too_large",
                None,
            ),
            (
                GatewayError::LimitExceeded {
                    key: "limits.wallMs",
                    message: "slow".into(),
                },
                413,
                "limit_exceeded",
                None,
            ),
            (
                GatewayError::Overloaded("full".into()),
                503,
                "overloaded",
                Some(1),
            ),
            (
                GatewayError::ShuttingDown("bye".into()),
                503,
                "shutting_down",
                Some(1),
            ),
            (
                GatewayError::TooManyPacks("many".into()),
                507,
                "too_many_packs",
                None,
            ),
            (GatewayError::internal("oops"), 500, "internal", None),
        ];
        for (gateway, status, code, retry_after) in cases {
            let e = ApiError::from(gateway.clone());
            assert_eq!(e.status().as_u16(), status, "{gateway:?}");
            assert_eq!(e.code.as_str(), code, "{gateway:?}");
            assert_eq!(e.retry_after, retry_after, "{gateway:?}");
            assert_eq!(e.message, gateway.to_string(), "{gateway:?}");
        }
        let e = ApiError::from(GatewayError::forbidden("no", Some("tenant")));
        assert_eq!(body(&e)["error"]["details"]["field"], "tenant");
        let e = ApiError::from(GatewayError::TooLarge {
            key: "server.maxPackCodeBytes",
            message: "big".into(),
        });
        assert_eq!(
            body(&e)["error"]["details"]["limit"],
            "server.maxPackCodeBytes"
        );
    }
}

//! `retry`, RFC 0248 §B's per-call policy, as a request carries it (and
//! alone, as the drop-ins' `callai.retry`): read whole, a key it does not
//! know refused rather than silently widened.

use super::shape::{Discard, Kind, Scalar, Shape, Shaped};
use crate::error::CallError;
use crate::request::{MAX_ATTEMPTS, RetryPolicy};
use serde::de::{DeserializeSeed, MapAccess};

/// Reads `retry` alone (the drop-ins' `callai.retry`): the policy, or its
/// refusal naming `retry.KEY` as a request's does.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRetry(pub Result<RetryPolicy, CallError>);

impl<'de> serde::Deserialize<'de> for ParsedRetry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Shape(RetryShape).deserialize(d).map(Self)
    }
}

/// `retry`: RFC 0248 §B's policy. A key this host does not know could be a
/// misspelt narrowing, so it is refused rather than silently widened: the
/// first such key in byte order, before the known keys' own refusals.
pub(crate) struct RetryShape;

impl<'de> Shaped<'de> for RetryShape {
    type Out = RetryPolicy;

    fn refuse(self, kind: Kind) -> CallError {
        CallError::validation("retry", format!("must be an object, got {kind}"))
    }

    fn map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<Result<RetryPolicy, CallError>, A::Error> {
        let (mut max_attempts, mut grow, mut unknown) = (None, None, None::<String>);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "maxAttempts" => max_attempts = Some(map.next_value::<Scalar>()?),
                "growMaxTokens" => grow = Some(map.next_value::<Scalar>()?),
                _ => {
                    map.next_value::<Discard>()?;
                    if unknown.as_ref().is_none_or(|u| key < *u) {
                        unknown = Some(key);
                    }
                }
            }
        }
        if let Some(unknown) = unknown {
            return Ok(Err(CallError::validation(
                format!("retry.{unknown}"),
                "is not a retry policy key (maxAttempts, growMaxTokens)",
            )));
        }
        let range = format!("1..{MAX_ATTEMPTS}");
        let policy = (|| {
            Ok(RetryPolicy {
                max_attempts: max_attempts
                    .map(|v| v.integer("retry.maxAttempts", &range))
                    .transpose()?,
                grow_max_tokens: grow.map(|v| v.boolean("retry.growMaxTokens")).transpose()?,
            })
        })();
        Ok(policy)
    }
}

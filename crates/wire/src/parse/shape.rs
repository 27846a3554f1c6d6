//! The pieces a request's visitor is made of: what a value was (for a
//! refusal's "got ..."), a scalar field read as any JSON value, and a
//! visitor for a field that wants an array or an object and describes
//! anything else.
//!
//! A field of the wrong shape is not a serde error: the value is read to
//! its end and the refusal kept (`Ok(Err(CallError))`), so that the rest of
//! the body is still read (a syntax error anywhere wins, as it did when the
//! body was parsed whole first) and the first refusal in the fields' order
//! is the one reported.

use crate::error::CallError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::fmt;

/// What a JSON value was, as a refusal says it: never more than a few
/// dozen characters of the caller's text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Null,
    Bool(bool),
    Number(Number),
    /// A string of at most 40 bytes, quoted in the message.
    Str(String),
    /// A longer string, not quoted.
    LongStr,
    Array,
    Object,
}

impl Kind {
    pub(crate) fn of_str(s: &str) -> Self {
        if s.len() <= 40 {
            Self::Str(s.to_owned())
        } else {
            Self::LongStr
        }
    }

    pub(crate) fn of_f64(f: f64) -> Self {
        // JSON has no NaN or infinity: every float read is finite.
        Number::from_f64(f).map_or(Self::Null, Self::Number)
    }

    pub(crate) fn of_value(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => Self::Number(n.clone()),
            Value::String(s) => Self::of_str(s),
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("null"),
            Self::Bool(b) => write!(f, "the boolean {b}"),
            Self::Number(n) => write!(f, "the number {n}"),
            Self::Str(s) => write!(f, "the string {s:?}"),
            Self::LongStr => f.write_str("a string"),
            Self::Array => f.write_str("an array"),
            Self::Object => f.write_str("an object"),
        }
    }
}

/// A field's value as any JSON value: a scalar kept, an array or object
/// read through and only named.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    Number(Number),
    Str(String),
    Array,
    Object,
}

impl Scalar {
    fn kind(&self) -> Kind {
        match self {
            Self::Null => Kind::Null,
            Self::Bool(b) => Kind::Bool(*b),
            Self::Number(n) => Kind::Number(n.clone()),
            Self::Str(s) => Kind::of_str(s),
            Self::Array => Kind::Array,
            Self::Object => Kind::Object,
        }
    }

    /// A string, or the refusal of `field`.
    pub(crate) fn string(self, field: impl FnOnce() -> String) -> Result<String, CallError> {
        match self {
            Self::Str(s) => Ok(s),
            other => Err(CallError::validation(
                field(),
                format!("must be a string, got {}", other.kind()),
            )),
        }
    }

    /// A number, or the refusal of `field`.
    pub(crate) fn number(self, field: &str) -> Result<f64, CallError> {
        match &self {
            Self::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
            other => Err(CallError::validation(
                field,
                format!("must be a number, got {}", other.kind()),
            )),
        }
    }

    /// A whole number in `u32` (`3`, `3.0` and `3e0` alike), or the refusal
    /// of `field` saying `range`: `2.5`, `"3"`, `null` and negatives are
    /// refused.
    pub(crate) fn integer(self, field: &str, range: &str) -> Result<u32, CallError> {
        match &self {
            Self::Number(n) => whole_u32(n),
            _ => None,
        }
        .ok_or_else(|| {
            CallError::validation(
                field,
                format!("must be an integer {range}, got {}", self.kind()),
            )
        })
    }

    /// A boolean, or the refusal of `field`.
    pub(crate) fn boolean(self, field: &str) -> Result<bool, CallError> {
        match self {
            Self::Bool(b) => Ok(b),
            other => Err(CallError::validation(
                field,
                format!("must be a boolean, got {}", other.kind()),
            )),
        }
    }
}

/// The whole number `n` stands for; `None` for a fraction or a value
/// outside `u32`.
fn whole_u32(n: &Number) -> Option<u32> {
    if let Some(u) = n.as_u64() {
        return u32::try_from(u).ok();
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f))
        .then_some(f as u32)
}

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Number::from_f64(v).map_or(Scalar::Null, Scalar::Number))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
                drain_seq(seq).map(|()| Scalar::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar, A::Error> {
                drain_map(map).map(|()| Scalar::Object)
            }
        }
        d.deserialize_any(V)
    }
}

/// A value read through and dropped, as strictly as a JSON tree would read
/// it (serde's `IgnoredAny` skips a number without reading it, so `1e400`
/// would pass unseen), without keeping any of it.
pub(crate) struct Discard;

impl<'de> serde::Deserialize<'de> for Discard {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Discard;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_str<E>(self, _: &str) -> Result<Discard, E> {
                Ok(Discard)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Discard, A::Error> {
                drain_seq(seq).map(|()| Discard)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Discard, A::Error> {
                drain_map(map).map(|()| Discard)
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads an array to its end.
pub(crate) fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Discard>()?.is_some() {}
    Ok(())
}

/// Reads an object to its end.
pub(crate) fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<Discard, Discard>()?.is_some() {}
    Ok(())
}

/// A field that wants an array or an object: what it makes of one, and
/// the refusal of any other value.
pub(crate) trait Shaped<'de>: Sized {
    /// What the field reads into.
    type Out;

    /// The refusal of a value that is `kind`.
    fn refuse(self, kind: Kind) -> CallError;

    /// An array; refused unless the field wants one.
    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Result<Self::Out, CallError>, A::Error> {
        drain_seq(seq)?;
        Ok(Err(self.refuse(Kind::Array)))
    }

    /// An object; refused unless the field wants one.
    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Result<Self::Out, CallError>, A::Error> {
        drain_map(map)?;
        Ok(Err(self.refuse(Kind::Object)))
    }
}

/// Reads a [`Shaped`] field: `Ok(Err(refusal))` when it has another shape.
pub(crate) struct Shape<S>(pub S);

impl<'de, S: Shaped<'de>> DeserializeSeed<'de> for Shape<S> {
    type Value = Result<S::Out, CallError>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Shaped<'de>> Visitor<'de> for Shape<S> {
    type Value = Result<S::Out, CallError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::Null)))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::Bool(v))))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::Number(v.into()))))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::Number(v.into()))))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::of_f64(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Err(self.0.refuse(Kind::of_str(v))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_read_as_the_values_they_describe_do() {
        for (text, said) in [
            ("null", "null"),
            ("true", "the boolean true"),
            ("17", "the number 17"),
            ("-1", "the number -1"),
            ("2.5", "the number 2.5"),
            ("3e0", "the number 3.0"),
            ("1e10", "the number 10000000000.0"),
            (r#""hi""#, r#"the string "hi""#),
            ("[1, [2]]", "an array"),
            (r#"{"a": {}}"#, "an object"),
        ] {
            let scalar: Scalar = serde_json::from_str(text).unwrap();
            assert_eq!(scalar.kind().to_string(), said, "{text}");
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(Kind::of_value(&value).to_string(), said, "{text}");
        }
        let long = json!("y".repeat(41));
        assert_eq!(Kind::of_value(&long).to_string(), "a string");
    }
}

//! Why each provider request was sent: RFC 0032's vocabulary where it has a
//! word, its `x-host-<host>-<key>` extension pattern where it has none.

use std::fmt;

/// Why the engine sent a provider request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestReason {
    /// The call's first request.
    First,
    /// The previous reply was JSON that broke the schema (RFC 0032).
    SchemaViolation,
    /// The previous reply was not JSON (RFC 0032).
    ParseError,
    /// The previous reply was cut off by its budget (RFC 0032, 0033).
    Truncation,
    /// The previous request failed in transit: a timeout, a dropped
    /// connection, 408, 429 or 5xx.
    Transient,
    /// The natural-language-to-JSON fallback (RFC 0032 §B.5).
    Fallback,
    /// The provider rejected native structured output: this request puts
    /// the schema in the prompt.
    NativeRejected,
    /// The previous target of a route's chain was unavailable (a refused
    /// connection, a timeout, 408, 429 or 5xx): this request goes to the
    /// next target.
    ProviderFallback,
}

impl RequestReason {
    /// Every reason, in the order above.
    pub const ALL: [Self; 8] = [
        Self::First,
        Self::SchemaViolation,
        Self::ParseError,
        Self::Truncation,
        Self::Transient,
        Self::Fallback,
        Self::NativeRejected,
        Self::ProviderFallback,
    ];

    /// The spelling in events, metrics and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::SchemaViolation => "schema-violation",
            Self::ParseError => "parse-error",
            Self::Truncation => "truncation",
            Self::Transient => "x-host-callai-transient",
            Self::Fallback => "x-host-callai-fallback",
            Self::NativeRejected => "x-host-callai-native-rejected",
            Self::ProviderFallback => "x-host-callai-provider-fallback",
        }
    }
}

impl fmt::Display for RequestReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_are_rfc_words_or_host_extensions() {
        for r in RequestReason::ALL {
            let s = r.as_str();
            let rfc = ["first", "schema-violation", "parse-error", "truncation"].contains(&s);
            assert!(rfc || s.starts_with("x-host-callai-"), "{s}");
        }
    }
}

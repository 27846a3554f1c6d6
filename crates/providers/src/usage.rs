//! What the answers of both wire formats share: token counts read
//! leniently, and the error a streamed answer can carry.

use serde::{Deserialize, Deserializer};

/// A token count as a provider reports it: a whole number that fits,
/// or none. Anything else there (a negative or fractional number, a
/// string, `null`) is read as no count rather than failing the answer,
/// so that an odd usage field costs `usageComplete`, not the reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens(pub Option<u32>);

impl<'de> Deserialize<'de> for Tokens {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // An untagged choice: a number that fits, else whatever it is,
        // read and left.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Reported {
            Count(u64),
            Other(serde::de::IgnoredAny),
        }
        Ok(Self(match Reported::deserialize(d)? {
            Reported::Count(n) => u32::try_from(n).ok(),
            Reported::Other(_) => None,
        }))
    }
}

/// Every input token of a request whose provider counts the prompt
/// cache's reads and writes apart from `input` (Anthropic's Messages API,
/// Bedrock's Converse): the host counts them in, as OpenAI does.
pub fn all_input(input: Option<u32>, read: Option<u32>, written: Option<u32>) -> Option<u32> {
    input.map(|n| {
        n.saturating_add(read.unwrap_or(0))
            .saturating_add(written.unwrap_or(0))
    })
}

/// A field that may be `null` as well as absent: either is its default.
pub fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The error object of an error event or body: `{"message": ...}`.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorObject {
    /// What the provider said.
    #[serde(default)]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_that_does_not_fit_reads_as_none() {
        let read = |json: &str| serde_json::from_str::<Tokens>(json).unwrap().0;
        assert_eq!(read("12"), Some(12));
        assert_eq!(read("0"), Some(0));
        for odd in [
            "-1",
            "1.5",
            "\"12\"",
            "null",
            "[1]",
            "{\"n\": 1}",
            "4294967296",
        ] {
            assert_eq!(read(odd), None, "{odd}");
        }
    }
}

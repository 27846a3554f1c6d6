//! The response cache's mark on a request it looked up and did not find:
//! the layer sets it ([`CacheMiss`], a request extension), the handlers of
//! the calls it covers read it into their call's plan, so that the call's
//! trace says `cache: "miss"`. Apart from both, so that neither reaches
//! the other.

/// On a request the cache looked up and did not find.
#[derive(Debug, Clone, Copy)]
pub struct CacheMiss;

/// The `cache` word of a call whose request carries `miss`.
pub fn cache_word(miss: Option<axum::Extension<CacheMiss>>) -> Option<&'static str> {
    miss.map(|_| "miss")
}

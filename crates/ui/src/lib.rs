//! The run viewer `callai serve` mounts at `/ui`: a few pages (calls and
//! one call's attempts, runs, tenants' budgets and spend, providers'
//! requests by reason) that read the server's own API in the browser with
//! the token the viewer is given, so a tenant's token shows only its own.
//!
//! Every asset is in the binary ([`include_str!`]): no CDN, no network, no
//! build step. The assets hold no data and no secret, so they are served to
//! anyone; every figure they show comes from a request the API checks.
//! The pages build their DOM from text nodes only (never HTML from data), and
//! a content security policy lets them load nothing from elsewhere.

mod assets;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

pub use assets::{ASSETS, Asset};

/// Where the viewer is mounted.
pub const PREFIX: &str = "/ui";

/// What a page may load: its own scripts, styles and API, and nothing else;
/// no frame may hold it.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The viewer's routes: `/ui` (to `/ui/`), `/ui/` (the page) and each
/// asset under `/ui/`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new()
        .route(PREFIX, get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { serve(&ASSETS[0]) }));
    for asset in ASSETS {
        router = router.route(
            &format!("{PREFIX}/{}", asset.name),
            get(move || async move { serve(asset) }),
        );
    }
    router
}

/// `asset`, with the headers every one carries.
fn serve(asset: &'static Asset) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            // Small and built in: revalidate, so an upgrade shows at once.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str) -> Response {
        router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_page_and_every_asset_are_served_with_their_type_and_policy() {
        let page = get("/ui/").await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert!(
            page.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("connect-src 'self'")
        );
        for asset in ASSETS {
            let answer = get(&format!("/ui/{}", asset.name)).await;
            assert_eq!(answer.status(), StatusCode::OK, "{}", asset.name);
            assert_eq!(answer.headers()[header::CONTENT_TYPE], asset.content_type);
            let body = axum::body::to_bytes(answer.into_body(), usize::MAX)
                .await
                .unwrap();
            assert_eq!(body, asset.body.as_bytes());
        }
    }

    #[tokio::test]
    async fn the_bare_prefix_redirects_and_an_unknown_asset_is_not_served() {
        let bare = get("/ui").await;
        assert_eq!(bare.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(bare.headers()[header::LOCATION], "/ui/");
        assert_eq!(get("/ui/nope.js").await.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn every_script_the_page_imports_is_served() {
        let served: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        for asset in ASSETS
            .iter()
            .filter(|a| a.name.ends_with(".js") || a.name.ends_with(".html"))
        {
            for import in imports(asset.body) {
                assert!(
                    served.contains(&import),
                    "{} imports {import}, not served",
                    asset.name
                );
            }
        }
    }

    /// The `./NAME` paths `source` imports or links.
    fn imports(source: &str) -> Vec<&str> {
        source
            .split(['"', '\''])
            .filter_map(|s| s.strip_prefix("./"))
            .filter(|s| [".js", ".css", ".svg"].iter().any(|e| s.ends_with(e)))
            .collect()
    }
}

//! The built-in HITL review console (docs/design.md#3-http-surface,
//! docs/design.md#7-human-in-the-loop): static HTML, CSS and JS modules, embedded
//! in the binary and served open at `/console` (no build step, nothing loaded from elsewhere).
//!
//! The page itself is a plain client of the gateway's HTTP API: its own calls carry the API
//! key the reviewer types, so serving the files needs none. A strict Content-Security-Policy
//! keeps the page to this origin (no inline script, no third-party connections).

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The console's files: name, content type, text.
const FILES: [(&str, &str, &str); 3] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../console/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../console/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/console.js"),
    ),
];

/// Only this origin: scripts and styles from the files above, API calls to the gateway.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /console`, `GET /console/`, `GET /console/{file}`; open routes (merge them outside
/// the auth layer).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/console", get(|| async { serve("index.html") }))
        .route("/console/", get(|| async { serve("index.html") }))
        .route(
            "/console/{file}",
            get(|Path(file): Path<String>| async move { serve(&file) }),
        )
}

/// One console file, or a plain 404 for any other name.
fn serve(name: &str) -> Response {
    let Some((_, content_type, text)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such console file\n").into_response();
    };
    let mut resp = (*text).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(uri: &str) -> (StatusCode, String, String) {
        let resp = routes::<()>()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn serves_each_file_with_its_content_type() {
        for (uri, ct) in [
            ("/console", "text/html"),
            ("/console/", "text/html"),
            ("/console/index.html", "text/html"),
            ("/console/console.css", "text/css"),
            ("/console/console.js", "text/javascript"),
        ] {
            let (status, got, body) = get(uri).await;
            assert_eq!(status, StatusCode::OK, "{uri}");
            assert!(got.starts_with(ct), "{uri}: {got}");
            assert!(!body.is_empty(), "{uri}");
        }
        let (status, _, _) = get("/console/../Cargo.toml").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, _) = get("/console/secret.txt").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for (name, _, text) in FILES {
            for needle in ["http://", "https://", "@import", "url("] {
                assert!(!text.contains(needle), "{name} names {needle}");
            }
            assert!(!text.contains("<script>"), "{name}: inline script");
        }
    }
}

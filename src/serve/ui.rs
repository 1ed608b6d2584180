//! The web UI: a few HTML, CSS and JavaScript files embedded in the binary (from
//! `assets/ui/`, so it works offline and no path of a request reaches the file system),
//! and the page routes that all answer with the same `index.html`: the script reads the
//! page from the URL (`/`, `/runs/{id}`, `/workflows`, `/workflows/{name}`). ADR 0038.

use axum::Router;
use axum::extract::Path as UrlPath;
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;
use super::state::Shared;

/// One embedded file.
struct Asset {
    /// Its name under `/ui/`.
    name: &'static str,
    /// Its media type.
    media_type: &'static str,
    /// Its bytes.
    body: &'static str,
}

/// The page every UI route answers with.
const INDEX: &str = include_str!("../../assets/ui/index.html");

/// The files under `/ui/`: a fixed list, looked up by name.
const ASSETS: &[Asset] = &[
    asset("app.js", include_str!("../../assets/ui/app.js")),
    asset("api.js", include_str!("../../assets/ui/api.js")),
    asset("dom.js", include_str!("../../assets/ui/dom.js")),
    asset("graph.js", include_str!("../../assets/ui/graph.js")),
    asset("runs.js", include_str!("../../assets/ui/runs.js")),
    asset("run.js", include_str!("../../assets/ui/run.js")),
    asset("timeline.js", include_str!("../../assets/ui/timeline.js")),
    asset("workflows.js", include_str!("../../assets/ui/workflows.js")),
    asset("style.css", include_str!("../../assets/ui/style.css")),
    asset(
        "viz-global.js",
        include_str!("../../assets/ui/viz-global.js"),
    ),
    asset("LICENSES", include_str!("../../assets/ui/LICENSES")),
];

/// An asset whose media type follows from its name's ending.
const fn asset(name: &'static str, body: &'static str) -> Asset {
    let media_type = match name.as_bytes() {
        [.., b'.', b'j', b's'] => "text/javascript; charset=utf-8",
        [.., b'.', b'c', b's', b's'] => "text/css; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    };
    Asset {
        name,
        media_type,
        body,
    }
}

/// What the pages may load: only this server's own files (the Graphviz WASM build is
/// compiled from an inlined module, hence `wasm-unsafe-eval`), no frames, no plugins.
const POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
                      style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                      object-src 'none'; base-uri 'none'; form-action 'self'; \
                      frame-ancestors 'none'";

/// The UI's routes, merged into the server's router.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(page))
        .route("/runs", get(page))
        .route("/runs/{id}", get(page_of))
        .route("/workflows", get(page))
        .route("/workflows/{name}", get(page_of))
        .route("/ui/{file}", get(file))
}

/// `index.html`, never cached (it names the scripts).
fn index() -> Response {
    (
        [
            (
                CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY)),
        ],
        INDEX,
    )
        .into_response()
}

/// `GET /`, `/runs`, `/workflows`: the page.
async fn page() -> Response {
    index()
}

/// `GET /runs/{id}`, `/workflows/{name}`: the page (the script reads the key from the
/// URL and asks the API, which answers 404 for an unknown one).
async fn page_of(UrlPath(_key): UrlPath<String>) -> Response {
    index()
}

/// `GET /ui/{file}`: an embedded file, or 404.
async fn file(UrlPath(name): UrlPath<String>) -> Result<Response, ApiError> {
    let asset = ASSETS
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| ApiError::NotFound {
            code: "unknown_path",
            message: format!("no UI file `{name}`"),
        })?;
    Ok((
        [
            (CONTENT_TYPE, HeaderValue::from_static(asset.media_type)),
            // Revalidated each time: a new binary may carry new files under the same names.
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY)),
        ],
        asset.body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_the_page_imports_is_embedded() {
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{} is empty", a.name);
        }
        let names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for part in a.body.split("from './").skip(1) {
                let imported = part.split('\'').next().unwrap_or_default();
                assert!(
                    names.contains(&imported),
                    "{} imports {imported}, not embedded",
                    a.name
                );
            }
        }
        assert!(INDEX.contains("/ui/app.js") && INDEX.contains("/ui/style.css"));
        assert_eq!(
            asset("a.js", "").media_type,
            "text/javascript; charset=utf-8"
        );
        assert_eq!(asset("a.css", "").media_type, "text/css; charset=utf-8");
    }
}

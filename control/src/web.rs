//! The browser side, served from the one origin: the crew panel at `/` (its modules under
//! `/join/`, its web app manifest and icons), its style sheet, Janus's JavaScript library with its WebRTC adapter and the admin's QR code library under `/vendor/`, what both pages
//! share under `/common/`, and the admin UI at `/admin` (its page also at `/admin/`, its ES
//! modules and style sheet under `/admin/`; it calls `/api/admin/*` with the admin token).
//!
//! Every file is embedded in the binary (`web/` at build time; `build.rs` runs `npm ci` for the
//! vendored libraries), so a running control needs no web directory and no internet. No build
//! step: the files are served as they are in `web/`.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file and where it is served.
#[derive(Debug)]
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! web_file {
    ($path:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/", $path))
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const MANIFEST: &str = "application/manifest+json";
const SVG: &str = "image/svg+xml";
const PNG: &str = "image/png";

const ASSETS: &[Asset] = &[
    Asset { path: "/", content_type: HTML, body: web_file!("join/index.html") },
    Asset { path: "/join.js", content_type: JS, body: web_file!("join/join.js") },
    Asset { path: "/join/audio.js", content_type: JS, body: web_file!("join/audio.js") },
    Asset { path: "/join/connection.js", content_type: JS, body: web_file!("join/connection.js") },
    // The panel installs as an app on a phone: manifest and icons.
    Asset { path: "/manifest.webmanifest", content_type: MANIFEST, body: web_file!("join/manifest.webmanifest") },
    Asset { path: "/icons/icon.svg", content_type: SVG, body: web_file!("join/icons/icon.svg") },
    Asset { path: "/icons/icon-192.png", content_type: PNG, body: web_file!("join/icons/icon-192.png") },
    Asset { path: "/icons/icon-512.png", content_type: PNG, body: web_file!("join/icons/icon-512.png") },
    Asset { path: "/common/style.css", content_type: CSS, body: web_file!("common/style.css") },
    Asset { path: "/common/theme.js", content_type: JS, body: web_file!("common/theme.js") },
    // The admin UI: one page, plain ES modules (imported by absolute path, so `/admin` and
    // `/admin/` both work).
    Asset { path: "/admin", content_type: HTML, body: web_file!("admin/index.html") },
    Asset { path: "/admin/", content_type: HTML, body: web_file!("admin/index.html") },
    Asset { path: "/admin/admin.css", content_type: CSS, body: web_file!("admin/admin.css") },
    Asset { path: "/admin/main.js", content_type: JS, body: web_file!("admin/main.js") },
    Asset { path: "/admin/api.js", content_type: JS, body: web_file!("admin/api.js") },
    Asset { path: "/admin/dom.js", content_type: JS, body: web_file!("admin/dom.js") },
    Asset { path: "/admin/groups.js", content_type: JS, body: web_file!("admin/groups.js") },
    Asset { path: "/admin/positions.js", content_type: JS, body: web_file!("admin/positions.js") },
    Asset { path: "/admin/soundcard.js", content_type: JS, body: web_file!("admin/soundcard.js") },
    Asset { path: "/admin/users.js", content_type: JS, body: web_file!("admin/users.js") },
    Asset { path: "/admin/stats.js", content_type: JS, body: web_file!("admin/stats.js") },
    Asset { path: "/admin/logs.js", content_type: JS, body: web_file!("admin/logs.js") },
    // janus-gateway's ES module build; it expects the adapter as the global `adapter`, which
    // the adapter's UMD build defines when loaded as a classic script.
    Asset {
        path: "/vendor/janus.js",
        content_type: JS,
        body: web_file!("node_modules/janus-gateway/npm/dist/janus.es.js"),
    },
    Asset {
        path: "/vendor/adapter.js",
        content_type: JS,
        body: web_file!("node_modules/webrtc-adapter/out/adapter.js"),
    },
    // The admin's QR codes of join links: qrcode-generator's ES module (no imports of its own).
    Asset {
        path: "/vendor/qrcode.js",
        content_type: JS,
        body: web_file!("node_modules/qrcode-generator/dist/qrcode.mjs"),
    },
];

/// The pages may load scripts, styles and sockets from this origin only, and nothing from
/// elsewhere: the venue has no internet, and the page holds a microphone.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; media-src 'self' blob:; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'none'; form-action 'self'";

/// The web files' routes; merge them into the application router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    ASSETS.iter().fold(Router::new(), |router, asset| {
        let etag = etag(asset.body);
        router.route(asset.path, get(move |headers: HeaderMap| async move { serve(asset, &etag, &headers) }))
    })
}

/// Answers with the file, or 304 when the browser's copy is current. `no-cache` makes the
/// browser revalidate every time, so a new build is picked up at once while an unchanged file
/// costs a 304 only: the paths are stable, not versioned.
fn serve(asset: &Asset, etag: &HeaderValue, request: &HeaderMap) -> Response {
    let fresh = request.get(header::IF_NONE_MATCH).is_some_and(|tags| {
        tags.to_str().is_ok_and(|tags| tags.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"))
    });
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::ETAG, etag.clone());
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    if asset.content_type == HTML {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    (headers, asset.body).into_response()
}

/// A strong entity tag from the content (64-bit FNV-1a): computed once per file at start.
fn etag(body: &[u8]) -> HeaderValue {
    let hash = body
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    HeaderValue::from_str(&format!("\"{hash:016x}\"")).expect("hex is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_unique_and_leave_api_and_janus_free() {
        let mut paths: Vec<_> = ASSETS.iter().map(|a| a.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), ASSETS.len());
        assert!(paths.iter().all(|p| !p.starts_with("/api") && !p.starts_with("/janus")));
    }

    #[test]
    fn every_admin_module_is_served() {
        // A module the page imports but the binary does not serve would break the whole UI.
        let served: Vec<_> = ASSETS.iter().map(|a| a.path).collect();
        let admin = ASSETS.iter().filter(|a| a.path.starts_with("/admin") && a.content_type != CSS);
        for asset in admin {
            let text = std::str::from_utf8(asset.body).expect("UTF-8");
            for quoted in text.split(['\'', '"']).filter(|s| s.starts_with('/') && s.ends_with(".js")) {
                assert!(served.contains(&quoted), "{} refers to {quoted}, which is not served", asset.path);
            }
        }
    }

    #[test]
    fn every_panel_module_is_served() {
        let served: Vec<_> = ASSETS.iter().map(|a| a.path).collect();
        let panel = ASSETS.iter().filter(|a| a.path == "/" || a.path == "/join.js" || a.path.starts_with("/join/"));
        for asset in panel {
            let text = std::str::from_utf8(asset.body).expect("UTF-8");
            let refs = text.split(['\'', '"']).filter(|s| s.starts_with('/') && !s.starts_with("//"));
            for quoted in
                refs.filter(|s| [".js", ".css", ".svg", ".png", ".webmanifest"].iter().any(|e| s.ends_with(e)))
            {
                assert!(served.contains(&quoted), "{} refers to {quoted}, which is not served", asset.path);
            }
        }
    }

    #[test]
    fn etag_follows_content() {
        assert_eq!(etag(b"a"), etag(b"a"));
        assert_ne!(etag(b"a"), etag(b"b"));
    }
}

//! The browser side, served from the one origin: the crew panel at `/` (its modules, web app
//! manifest and icons under `/join/`), the admin UI at `/admin` (its modules and style sheet
//! under `/admin/`; it calls `/api/admin/*` with the admin token), what both pages share under
//! `/common/`, and the browser libraries under `/vendor/` (Janus's JavaScript library, its WebRTC
//! adapter, the admin's QR code library).
//!
//! Every file is embedded in the binary by `rust-embed` (`web/` at build time, also in debug
//! builds; `build.rs` runs `npm ci` for the vendored libraries), so a running control needs no
//! web directory and no internet. No build step: a file of `web/join`, `web/admin` or
//! `web/common` is served at its path in `web/`, as it is.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::{EmbeddedFile, RustEmbed};

/// The pages' own files, each served at `/<its path in web/>`.
#[derive(RustEmbed)]
#[folder = "../web/"]
#[include = "join/*"]
#[include = "join/icons/*"]
#[include = "admin/*"]
#[include = "common/*"]
struct Pages;

/// The browser libraries, installed by npm: the files the pages load, and nothing else of
/// `node_modules`.
#[derive(RustEmbed)]
#[folder = "../web/node_modules/"]
#[include = "janus-gateway/npm/dist/janus.es.js"]
#[include = "webrtc-adapter/out/adapter.js"]
#[include = "qrcode-generator/dist/qrcode.mjs"]
struct Vendor;

/// Where each library is served. janus-gateway's ES module build expects the adapter as the
/// global `adapter`, which the adapter's UMD build defines when loaded as a classic script;
/// qrcode-generator's ES module has no imports of its own.
const VENDOR_PATHS: [(&str, &str); 3] = [
    ("/vendor/janus.js", "janus-gateway/npm/dist/janus.es.js"),
    ("/vendor/adapter.js", "webrtc-adapter/out/adapter.js"),
    ("/vendor/qrcode.js", "qrcode-generator/dist/qrcode.mjs"),
];

/// The pages' entry points, besides their own paths.
const PAGE_PATHS: [(&str, &str); 3] =
    [("/", "join/index.html"), ("/admin", "admin/index.html"), ("/admin/", "admin/index.html")];

/// The pages may load scripts, styles and sockets from this origin only, and nothing from
/// elsewhere: the venue has no internet, and the page holds a microphone.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; media-src 'self' blob:; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'none'; form-action 'self'";

/// Every URL path served and its file.
fn served() -> impl Iterator<Item = (String, EmbeddedFile)> {
    let pages = Pages::iter().map(|path| (format!("/{path}"), path));
    let entry_points = PAGE_PATHS.iter().map(|&(url, path)| (url.to_owned(), path.into()));
    let page_files = pages.chain(entry_points).filter_map(|(url, path)| Some((url, Pages::get(&path)?)));
    let vendor_files = VENDOR_PATHS.iter().filter_map(|&(url, path)| Some((url.to_owned(), Vendor::get(path)?)));
    page_files.chain(vendor_files)
}

/// The web files' routes; merge them into the application router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    served().fold(Router::new(), |router, (url, file)| {
        let asset = Asset::new(&file);
        router.route(&url, get(move |headers: HeaderMap| async move { asset.serve(&headers) }))
    })
}

/// One file as served: its bytes and the headers that describe it, made once at start.
#[derive(Debug, Clone)]
struct Asset {
    body: &'static [u8],
    content_type: HeaderValue,
    etag: HeaderValue,
    is_page: bool,
}

impl Asset {
    fn new(file: &EmbeddedFile) -> Asset {
        let body: &'static [u8] = match &file.data {
            std::borrow::Cow::Borrowed(bytes) => bytes,
            // Embedded files are borrowed from the binary; an owned one is leaked once, at start.
            std::borrow::Cow::Owned(bytes) => Box::leak(bytes.clone().into_boxed_slice()),
        };
        // RFC 9239 made `text/javascript` the one type of JavaScript; mime_guess still says
        // `application/javascript` for `.mjs`.
        let mime = match file.metadata.mimetype() {
            "application/javascript" => "text/javascript",
            mime => mime,
        };
        let is_text = mime.starts_with("text/");
        let content_type = if is_text { format!("{mime}; charset=utf-8") } else { mime.to_owned() };
        Asset {
            body,
            content_type: HeaderValue::from_str(&content_type).expect("a MIME type is a valid header value"),
            etag: etag(&file.metadata.sha256_hash()),
            is_page: mime == "text/html",
        }
    }

    /// Answers with the file, or 304 when the browser's copy is current. `no-cache` makes the
    /// browser revalidate every time, so a new build is picked up at once while an unchanged file
    /// costs a 304 only: the paths are stable, not versioned.
    fn serve(&self, request: &HeaderMap) -> Response {
        let fresh = request.get(header::IF_NONE_MATCH).is_some_and(|tags| {
            tags.to_str().is_ok_and(|tags| tags.split(',').any(|tag| tag.trim() == self.etag || tag.trim() == "*"))
        });
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(header::ETAG, self.etag.clone());
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        if fresh {
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        headers.insert(header::CONTENT_TYPE, self.content_type.clone());
        if self.is_page {
            headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
            headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        }
        (headers, self.body).into_response()
    }
}

/// A strong entity tag: the first 128 bits of the content's SHA-256, which rust-embed computed
/// at build time.
fn etag(sha256: &[u8; 32]) -> HeaderValue {
    let hex: String = sha256[..16].iter().map(|byte| format!("{byte:02x}")).collect();
    HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls() -> Vec<String> {
        served().map(|(url, _)| url).collect()
    }

    #[test]
    fn every_listed_file_is_embedded_and_paths_leave_api_and_janus_free() {
        let mut urls = urls();
        assert_eq!(urls.len(), Pages::iter().count() + PAGE_PATHS.len() + VENDOR_PATHS.len(), "{urls:?}");
        urls.sort_unstable();
        urls.dedup();
        assert_eq!(urls.len(), Pages::iter().count() + PAGE_PATHS.len() + VENDOR_PATHS.len(), "unique");
        assert!(urls.iter().all(|p| !p.starts_with("/api") && !p.starts_with("/janus")));
    }

    /// A module, style sheet, icon or manifest a page refers to but the binary does not serve
    /// would break the page.
    #[test]
    fn every_file_a_page_refers_to_is_served() {
        let urls = urls();
        for (url, file) in served().filter(|(url, _)| !url.starts_with("/vendor/")) {
            let Ok(text) = std::str::from_utf8(&file.data) else { continue };
            let refs = text.split(['\'', '"']).filter(|s| s.starts_with('/') && !s.starts_with("//"));
            for quoted in
                refs.filter(|s| [".js", ".css", ".svg", ".png", ".webmanifest"].iter().any(|e| s.ends_with(e)))
            {
                assert!(urls.iter().any(|u| u == quoted), "{url} refers to {quoted}, which is not served");
            }
        }
    }

    #[test]
    fn types_are_the_browsers_expected_ones() {
        let type_of = |url: &str| {
            let (_, file) = served().find(|(u, _)| u == url).expect(url);
            Asset::new(&file).content_type
        };
        assert_eq!(type_of("/"), "text/html; charset=utf-8");
        assert_eq!(type_of("/join/main.js"), "text/javascript; charset=utf-8");
        assert_eq!(type_of("/vendor/qrcode.js"), "text/javascript; charset=utf-8");
        assert_eq!(type_of("/common/style.css"), "text/css; charset=utf-8");
        assert_eq!(type_of("/join/manifest.webmanifest"), "application/manifest+json");
        assert_eq!(type_of("/join/icons/icon.svg"), "image/svg+xml");
        assert_eq!(type_of("/join/icons/icon-192.png"), "image/png");
    }

    #[test]
    fn etag_follows_content() {
        assert_eq!(etag(&[1; 32]), etag(&[1; 32]));
        assert_ne!(etag(&[1; 32]), etag(&[2; 32]));
    }
}

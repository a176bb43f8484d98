//! The browser side of the one origin: the join page and its files (the `/janus` proxy to a
//! real Janus: `proxy.rs`).

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};

use crate::support::{Control, http};

/// What each file must be served as, and a piece of its content that proves it is the right one.
const FILES: &[(&str, &str, &str)] = &[
    ("/", "text/html; charset=utf-8", r#"<script type="module" src="/join/main.js">"#),
    ("/join/main.js", "text/javascript; charset=utf-8", "from '/join/lifecycle.js'"),
    ("/join/connection.js", "text/javascript; charset=utf-8", "from '/vendor/janus.js'"),
    ("/join/manifest.webmanifest", "application/manifest+json", "\"display\": \"standalone\""),
    ("/common/style.css", "text/css; charset=utf-8", "prefers-color-scheme: dark"),
    ("/vendor/janus.js", "text/javascript; charset=utf-8", "export { Janus as default }"),
    ("/vendor/adapter.js", "text/javascript; charset=utf-8", "adapterFactory"),
];

#[tokio::test]
async fn the_join_page_and_its_files_are_served_with_their_types() {
    let control = Control::start().await;
    let client = http();
    for &(path, content_type, content) in FILES {
        let response = client.get(format!("{}{path}", control.origin)).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers().clone();
        assert_eq!(headers[CONTENT_TYPE], content_type, "{path}");
        assert_eq!(headers[CACHE_CONTROL], "no-cache", "{path}");
        let body = response.text().await.expect("body");
        assert!(body.contains(content), "{path} should contain {content:?}");

        // The browser's copy is revalidated with the entity tag: 304, no body.
        let etag = headers[ETAG].clone();
        let again = client.get(format!("{}{path}", control.origin)).header(IF_NONE_MATCH, etag).send().await;
        let again = again.expect("request");
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert!(again.bytes().await.expect("body").is_empty());
    }
}

#[tokio::test]
async fn the_page_only_loads_from_its_own_origin() {
    let control = Control::start().await;
    let response = http().get(&control.origin).send().await.expect("request");
    let csp = response.headers()["content-security-policy"].to_str().expect("ascii").to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let page = response.text().await.expect("body");
    assert!(!page.contains("http://") && !page.contains("https://"), "the page names no other origin");
}

#[tokio::test]
async fn a_plain_get_of_the_proxy_is_a_json_error() {
    let control = Control::start().await;
    let response = http().get(format!("{}/janus", control.origin)).send().await.expect("request");
    let (status, body) = crate::support::read(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "bad_request", "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("janus-protocol")), "{body}");
}

//! The request bodies of every write route, through the real router in-process.
//!
//! The first byte picks an operation with a request body from the OpenAPI document (so a new
//! write route is fuzzed without touching this file); the rest is the body, sent as
//! `application/json` with the admin token. The state is the server's, with the config file in
//! a temp dir, Janus unconfigured and partyline-bridged absent (its bus address does not exist).
//!
//! Invariants: no panic; no 5xx but `503 unavailable` where the operation documents it; every
//! error is `{"error","code"}`; a refused request leaves the file byte-identical; after an
//! accepted one the file parses, validates and equals the config in force. The config is
//! put back to the seed before the next input, so every input runs from the same state.

#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use libfuzzer_sys::fuzz_target;
use partyline_control::api::{self, AppState};
use partyline_control::app;
use partyline_shared::Config;
use serde_json::Value;
use tower::ServiceExt;

const TOKEN: &str = "fuzz-admin-token";
const SEED: &str = "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:0\n  tls: false\n\
groups:\n  - name: Stage Left\n    audioBitrate: 96\n  - name: FOH\n\
audio:\n  channelNames:\n    inputs:\n      \"0\": Stage mic\n";

struct Route {
    method: Method,
    path: String,
    internal: bool,
    documents_503: bool,
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    app: Router,
    events: Router,
    /// For the config manager (reset to the seed, compared with the file).
    state: AppState,
    path: PathBuf,
    routes: Vec<Route>,
    /// The file may differ from the seed (an input was accepted).
    dirty: AtomicBool,
    _dir: tempfile::TempDir,
}

/// The operations with a request body, from the OpenAPI document; path parameters are ids
/// that exist in the seed where the route has them.
fn routes() -> Vec<Route> {
    let document = serde_json::to_value(api::openapi()).expect("the document renders");
    let mut routes = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            if operation.get("requestBody").is_none() {
                continue;
            }
            let Ok(method) = Method::from_bytes(method.to_uppercase().as_bytes()) else { continue };
            let id = if path.contains("/groups/") { "stage-left" } else { "foh" };
            let path = path.replace("{id}", id).replace("{identity}", id);
            let internal = operation["tags"].as_array().is_some_and(|tags| tags.iter().any(|t| t == "internal"));
            let documents_503 = operation["responses"].get("503").is_some();
            routes.push(Route { method, path, internal, documents_503 });
        }
    }
    assert!(routes.len() >= 8, "every write route: {}", routes.len());
    routes
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        // As at start-up (server.rs): the process's TLS provider, before the Janus client.
        partyline_shared::crypto::install_provider();
        // tmpfs where there is one: control fsyncs every write.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.expect("temp dir");
        let path = dir.path().join("partyline.yaml");
        std::fs::write(&path, SEED).expect("write the seed");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let state = runtime
            .block_on(async { AppState::offline(&path, dir.path(), TOKEN) })
            .expect("the seed loads");
        let path = state.config.path().to_owned();
        let events = app::events_app(state.clone());
        let app = app::app(state.clone());
        Harness { runtime, app, events, state, path, routes: routes(), dirty: AtomicBool::new(false), _dir: dir }
    })
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).expect("read the config")
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let h = harness();
    if h.dirty.swap(false, Ordering::Relaxed) {
        std::fs::write(&h.path, SEED).expect("restore the seed");
        h.state.config.reload().expect("the seed reloads");
    }
    let route = &h.routes[usize::from(pick) % h.routes.len()];
    let before = read(&h.path);
    let request = Request::builder()
        .method(route.method.clone())
        .uri(&route.path)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::from(body.to_vec()))
        .expect("request");
    let router = if route.internal { h.events.clone() } else { h.app.clone() };
    let (status, text) = h.runtime.block_on(async {
        let response = router.oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    });
    let what = format!("{} {}", route.method, route.path);

    let unavailable = status == StatusCode::SERVICE_UNAVAILABLE && route.documents_503;
    assert!(!status.is_server_error() || unavailable, "{what}: {status} {text}");
    if status.is_client_error() || status.is_server_error() {
        let error: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {status}, not JSON ({e}): {text}"));
        let object = error.as_object().unwrap_or_else(|| panic!("{what}: {text}"));
        assert!(object.len() == 2 && object["error"].is_string() && object["code"].is_string(), "{what}: {text}");
        if unavailable {
            assert_eq!(object["code"], "unavailable", "{what}: {text}");
        }
    }

    let after = read(&h.path);
    if status.is_success() {
        if after != before {
            h.dirty.store(true, Ordering::Relaxed);
            let mut on_disk =
                Config::from_yaml(&after).unwrap_or_else(|e| panic!("{what}: accepted, file unreadable: {e}\n{after}"));
            assert!(on_disk.take_legacy().is_empty());
            on_disk.validate().unwrap_or_else(|e| panic!("{what}: accepted, file invalid: {e}\n{after}"));
            assert_eq!(on_disk, *h.state.config.current(), "{what}: file and memory disagree");
        }
    } else {
        assert_eq!(after, before, "{what}: {status} {text}: refused, yet the file changed");
    }
});

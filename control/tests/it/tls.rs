//! The listener's configured certificate, renewed on disk (certbot, an ACME client), is served to
//! new connections without a restart, and the API shows the new one's SHA-256.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::support::Control;

#[tokio::test]
async fn a_certificate_renewed_on_disk_is_served_without_a_restart() {
    partyline_shared::crypto::install_provider();
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = (dir.path().join("fullchain.pem"), dir.path().join("key.pem"));
    let first = write_certificate(&cert, &key);
    let config = format!(
        "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:0\n  tls: {{ cert: {}, key: {} }}\n",
        cert.display(),
        key.display()
    );
    let control = Control::builder().config(Some(&config)).start().await;
    let pin_before = pinned(&control, &first).await.expect("the first certificate is served");

    let second = write_certificate(&cert, &key);
    let deadline = Instant::now() + Duration::from_secs(15);
    let pin_after = loop {
        if let Some(pin) = pinned(&control, &second).await {
            break pin;
        }
        assert!(Instant::now() < deadline, "the renewed certificate is not served after 15 s:\n{}", control.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(pin_after, pin_before, "the API shows the renewed certificate's SHA-256");
    assert!(pinned(&control, &first).await.is_none(), "the old certificate is no longer served");
    assert!(control.log_text().contains("TLS certificate renewed on disk"), "{}", control.log_text());

    // A renewal that does not load (a key that does not fit) leaves the served one in place.
    std::fs::write(&key, rcgen::KeyPair::generate().expect("key").serialize_pem()).expect("write key");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !control.log_text().contains("does not load: the previous one is still served") {
        assert!(Instant::now() < deadline, "no warning for a broken renewal:\n{}", control.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(pinned(&control, &second).await, Some(pin_after), "still served");
}

/// A new self-signed certificate for 127.0.0.1 in `cert` and its key in `key`; its PEM.
fn write_certificate(cert: &Path, key: &Path) -> String {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("certificate");
    std::fs::write(key, made.signing_key.serialize_pem()).expect("write key");
    std::fs::write(cert, made.cert.pem()).expect("write certificate");
    made.cert.pem()
}

/// The certificate SHA-256 the API shows, asked over a new connection that trusts `pem` alone;
/// `None` when the listener serves another certificate.
async fn pinned(control: &Control, pem: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(pem.as_bytes()).expect("pem")])
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let response = client.get(control.url("/admin/stats")).bearer_auth(&control.token).send().await.ok()?;
    assert_eq!(response.status(), StatusCode::OK);
    let stats: Value = response.json().await.expect("json");
    stats["tls"]["certificateSha256"].as_str().map(str::to_owned)
}

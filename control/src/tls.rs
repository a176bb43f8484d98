//! The listener's TLS: the configured certificate, or a self-signed one generated on first
//! start into the state directory (browsers give the microphone only to secure contexts). A
//! configured certificate is followed: renewed on disk (certbot, an ACME client), it is served
//! to new connections within seconds, without a restart.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use partyline_shared::config::TlsMode;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::files::{self, Durability};

/// The listener's TLS: its rustls config and what clients may pin.
#[derive(Debug)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// The SHA-256 of the server's certificate (the leaf, DER), as browsers show it: upper-case
    /// hex bytes joined by colons. A control surface pins it instead of trusting any certificate.
    pub certificate_sha256: String,
}

/// The SHA-256 of the certificate the listener serves now (`AB:CD:…`), or none without TLS:
/// what control surfaces pin, and what the API says.
#[derive(Debug, Clone, Default)]
pub struct CertificatePin(Arc<RwLock<Option<String>>>);

impl CertificatePin {
    pub fn new(sha256: Option<String>) -> Self {
        CertificatePin(Arc::new(RwLock::new(sha256)))
    }

    pub fn get(&self) -> Option<String> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether the listener speaks TLS (it has a certificate).
    pub fn is_set(&self) -> bool {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    fn set(&self, sha256: String) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sha256);
    }
}

/// How often the configured certificate and key files are looked at.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// The listener's TLS for `mode`, or `None` for plain HTTP.
pub fn server_config(mode: &TlsMode, state_dir: &Path) -> anyhow::Result<Option<Tls>> {
    match files(mode, state_dir)? {
        Some((cert, key)) => from_files(&cert, &key).map(Some),
        None => Ok(None),
    }
}

/// The certificate and key files for `mode` (the self-signed pair generated if missing).
pub fn files(mode: &TlsMode, state_dir: &Path) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
    match mode {
        TlsMode::Off => Ok(None),
        TlsMode::Files { cert, key } => Ok(Some((cert.clone(), key.clone()))),
        TlsMode::SelfSigned => self_signed(state_dir).map(Some),
    }
}

/// Serves `cert` and `key` again through `served` whenever either changes on disk (a renewal
/// replaces both), and updates `pin`. A pair that does not load (half written, not matching)
/// is logged and the certificate served stays until the next change.
pub async fn follow_files(
    cert: PathBuf,
    key: PathBuf,
    served: axum_server::tls_rustls::RustlsConfig,
    pin: CertificatePin,
) {
    let stamp = |path: &Path| fs::metadata(path).and_then(|m| Ok((m.modified()?, m.len()))).ok();
    let stamps = || (stamp(&cert), stamp(&key));
    let mut seen = stamps();
    let mut interval = tokio::time::interval(FOLLOW_EVERY);
    loop {
        interval.tick().await;
        let now = stamps();
        if now == seen {
            continue;
        }
        seen = now;
        match from_files(&cert, &key) {
            Ok(tls) => {
                served.reload_from_config(tls.config);
                tracing::info!(cert = %cert.display(), sha256 = tls.certificate_sha256, "TLS certificate renewed on disk: served from now on");
                pin.set(tls.certificate_sha256);
            }
            Err(error) => tracing::warn!(cert = %cert.display(), error = format!("{error:#}"),
                "the TLS certificate changed on disk and does not load: the previous one is still served"),
        }
    }
}

/// The TLS of the certificate chain in `cert` and its key in `key`.
fn from_files(cert: &Path, key: &Path) -> anyhow::Result<Tls> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("cannot read the certificate {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("cannot read the key {}", key.display()))?;
    let leaf = chain.first().with_context(|| format!("no certificate in {}", cert.display()))?;
    let certificate_sha256 = fingerprint(leaf);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tracing::info!(sha256 = certificate_sha256, "TLS certificate");
    Ok(Tls { config: Arc::new(config), certificate_sha256 })
}

/// `AB:CD:…`: the SHA-256 of `certificate`.
fn fingerprint(certificate: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, certificate.as_ref());
    digest.as_ref().iter().map(|byte| format!("{byte:02X}")).collect::<Vec<_>>().join(":")
}

/// The generated certificate's files, created on first use.
fn self_signed(state_dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (cert_path, key_path) = (state_dir.join("tls-cert.pem"), state_dir.join("tls-key.pem"));
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if let Ok(host) = fs::read_to_string("/etc/hostname") {
        names.push(host.trim().to_owned());
    }
    let generated = rcgen::generate_simple_self_signed(names).context("cannot generate a certificate")?;
    fs::create_dir_all(state_dir)?;
    files::replace(&key_path, generated.signing_key.serialize_pem().as_bytes(), 0o600, Durability::Disk)?;
    files::replace(&cert_path, generated.cert.pem().as_bytes(), 0o600, Durability::Disk)?;
    tracing::info!(cert = %cert_path.display(), "generated a self-signed TLS certificate");
    Ok((cert_path, key_path))
}

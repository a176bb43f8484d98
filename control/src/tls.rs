//! The listener's TLS: the configured certificate, or a self-signed one generated on first
//! start into the state directory (browsers give the microphone only to secure contexts).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The listener's TLS for `mode`, or `None` for plain HTTP.
pub fn server_config(mode: &TlsMode, state_dir: &Path) -> anyhow::Result<Option<Tls>> {
    let (cert, key) = match mode {
        TlsMode::Off => return Ok(None),
        TlsMode::Files { cert, key } => (cert.clone(), key.clone()),
        TlsMode::SelfSigned => self_signed(state_dir)?,
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("cannot read the certificate {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&key).with_context(|| format!("cannot read the key {}", key.display()))?;
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
    Ok(Some(Tls { config: Arc::new(config), certificate_sha256 }))
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

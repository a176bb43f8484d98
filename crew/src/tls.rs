//! How the crew checks control's TLS certificate. A venue's box usually has a self-signed
//! certificate that no root vouches for: its SHA-256 (shown on the admin page and in every
//! token answer, `certificateSha256`) is pinned instead, as a control surface does. Without a
//! pin, `--insecure` takes any certificate (a lab's choice, never a show's).

use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// What the crew accepts as control's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsCheck {
    /// Only the certificate whose SHA-256 is this.
    Pinned([u8; 32]),
    /// Any certificate.
    Insecure,
}

impl TlsCheck {
    /// A pin written as control shows it (`AB:CD:…`, colons optional, any case).
    pub fn pinned(text: &str) -> Result<TlsCheck, String> {
        let hex: String = text.chars().filter(|c| *c != ':').collect();
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| hex.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| format!("{text:?} is not a SHA-256 in hex"))?;
        let digest = bytes.try_into().map_err(|_| format!("{text:?} is not 32 bytes (a SHA-256)"))?;
        Ok(TlsCheck::Pinned(digest))
    }

    /// The rustls client configuration that applies this check.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        partyline_shared::crypto::install_provider();
        let provider = rustls::crypto::ring::default_provider();
        let verifier = Arc::new(Verifier { check: self.clone(), provider: Arc::new(provider) });
        let config = rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Arc::new(config)
    }
}

/// Accepts the pinned certificate (or any, when insecure); handshake signatures are still
/// verified, so the server holds the certificate's key.
#[derive(Debug)]
struct Verifier {
    check: TlsCheck,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.check {
            TlsCheck::Insecure => Ok(ServerCertVerified::assertion()),
            TlsCheck::Pinned(pin) => {
                let digest = ring::digest::digest(&ring::digest::SHA256, end_entity.as_ref());
                if digest.as_ref() == pin {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(rustls::Error::General("the server's certificate is not the pinned one".into()))
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::TlsCheck;

    #[test]
    fn a_pin_reads_as_control_shows_it() {
        let shown = ["AB"; 32].join(":");
        assert_eq!(TlsCheck::pinned(&shown), Ok(TlsCheck::Pinned([0xab; 32])));
        assert_eq!(TlsCheck::pinned(&"ab".repeat(32)), Ok(TlsCheck::Pinned([0xab; 32])));
        assert!(TlsCheck::pinned("AB:CD").is_err_and(|e| e.contains("32 bytes")));
        assert!(TlsCheck::pinned(&"zz".repeat(32)).is_err_and(|e| e.contains("hex")));
    }
}

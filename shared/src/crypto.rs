//! The process's TLS crypto provider.

/// Installs ring as the process-wide rustls crypto provider. reqwest is built without one
/// (`rustls-no-provider`: ring builds fast and everywhere, and a bundled aws-lc would be a
/// second provider), so every process calls this once at start, before it builds an HTTP
/// client. A second call changes nothing.
pub fn install_provider() {
    // An error means a provider is installed already: the one a first call installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

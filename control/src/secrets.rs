//! The admin token: from `PARTYLINE_ADMIN_TOKEN`, else the state directory's `admin-token`
//! file, else the config file's `server.adminToken`, else generated into that file (0600).
//! The token itself is never logged; its path is.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use subtle::ConstantTimeEq;

const FILE_NAME: &str = "admin-token";
pub const ENV_VAR: &str = "PARTYLINE_ADMIN_TOKEN";

/// A bearer token compared in constant time.
#[derive(Clone)]
pub struct AdminToken(String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(********)")
    }
}

/// Where the token came from, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Environment,
    File(std::path::PathBuf),
    ConfigFile,
    Generated(std::path::PathBuf),
}

impl AdminToken {
    pub fn new(token: String) -> Self {
        Self(token)
    }

    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Finds (or creates) the admin token.
    pub fn resolve(state_dir: &Path, from_config: Option<&str>) -> io::Result<(AdminToken, TokenSource)> {
        if let Some(token) = std::env::var(ENV_VAR).ok().filter(|t| !t.trim().is_empty()) {
            return Ok((AdminToken(token.trim().to_owned()), TokenSource::Environment));
        }
        let path = state_dir.join(FILE_NAME);
        match fs::read_to_string(&path) {
            Ok(token) if !token.trim().is_empty() => {
                return Ok((AdminToken(token.trim().to_owned()), TokenSource::File(path)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if let Some(token) = from_config.filter(|t| !t.trim().is_empty()) {
            return Ok((AdminToken(token.trim().to_owned()), TokenSource::ConfigFile));
        }
        let token = random_token()?;
        fs::create_dir_all(state_dir)?;
        let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        writeln!(file, "{token}")?;
        file.sync_all()?;
        Ok((AdminToken(token), TokenSource::Generated(path)))
    }
}

/// 256 random bits, hex.
pub fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generated_once_with_mode_0600_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, source) = AdminToken::resolve(dir.path(), None).expect("generated");
        assert!(matches!(source, TokenSource::Generated(_)));
        assert_eq!(first.expose().len(), 64);
        let mode = fs::metadata(dir.path().join(FILE_NAME)).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, source) = AdminToken::resolve(dir.path(), Some("ignored")).expect("read");
        assert!(matches!(source, TokenSource::File(_)));
        assert!(again.matches(first.expose()));
        assert!(!again.matches("wrong"));
    }
}

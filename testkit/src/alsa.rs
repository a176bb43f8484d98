//! ALSA devices of a test's own: an `.asoundrc` in a home directory of the test's, which every
//! process started with `HOME` set to [`AlsaHome::home`] reads (alsa-lib loads `~/.asoundrc` on
//! top of the system's configuration). Plugin PCMs (`multi`, `file`, `pulse`, …) stand in for
//! cards on a machine without one.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// A home directory holding `.asoundrc`; removed on drop.
#[derive(Debug)]
pub struct AlsaHome {
    dir: TempDir,
}

impl AlsaHome {
    /// A home whose `.asoundrc` is `asoundrc`.
    pub fn new(asoundrc: &str) -> AlsaHome {
        let dir = tempfile::Builder::new().prefix("partyline-alsa-").tempdir_in("/tmp").expect("create the ALSA home");
        std::fs::write(dir.path().join(".asoundrc"), asoundrc).expect("write .asoundrc");
        AlsaHome { dir }
    }

    /// The value for `HOME`.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the home (for a `file` PCM's data).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `pcm.NAME`: a PCM of exactly `channels` channels, both ways, that discards what is played
/// and captures silence (an ALSA `multi` over the `null` PCM), with `description` as its hint.
pub fn fixed_channels_pcm(name: &str, channels: u32, description: &str) -> String {
    let bindings: Vec<String> = (0..channels).map(|k| format!("{k} {{ slave a; channel {k} }}")).collect();
    format!(
        "pcm.{name} {{\n    type multi\n    slaves.a {{ pcm \"null\"; channels {channels} }}\n    \
         bindings {{ {} }}\n    hint {{ show on; description \"{description}\" }}\n}}\n",
        bindings.join(" ")
    )
}

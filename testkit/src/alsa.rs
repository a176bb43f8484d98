//! ALSA devices of a test's own: an `.asoundrc` in a home directory of the test's, which every
//! process started with `HOME` set to [`AlsaHome::home`] reads (alsa-lib loads `~/.asoundrc` on
//! top of the system's configuration). Plugin PCMs (`multi`, `file`, `pulse`, …) stand in for
//! cards on a machine without one.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::audio::{CHANNELS, RATE};

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

impl AlsaHome {
    /// A FIFO `name` in the home that always holds the next samples of an endless sine of `freq`
    /// Hz (amplitude 0.5) on `channel` of 8, silence on the others, F32LE interleaved at
    /// [`RATE`]: the `infile` of a `file` PCM, whose capture then carries exactly these device
    /// channels (the PCM's slave only sets the pace). Written by a thread of the test's own,
    /// which blocks while the FIFO is full and ends with the test process.
    pub fn tone_fifo(&self, name: &str, channel: usize, freq: u32) -> PathBuf {
        let path = self.file(name);
        let made = std::process::Command::new("mkfifo").arg(&path).status().expect("run mkfifo");
        assert!(made.success(), "mkfifo {}", path.display());
        // Read and write: the open returns at once, and a reader that goes (a pipeline rebuilt)
        // never makes the writer fail (fifo(7)).
        let mut fifo = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open the FIFO");
        std::thread::spawn(move || {
            // 128 frames of 32 bytes: 4096 bytes, written at once (PIPE_BUF), so a reader asking
            // for whole frames always gets whole frames.
            const FRAMES: usize = 128;
            let step = 2.0 * std::f64::consts::PI * f64::from(freq) / f64::from(RATE);
            let mut n: u64 = 0;
            loop {
                let mut chunk = Vec::with_capacity(FRAMES * CHANNELS * 4);
                for _ in 0..FRAMES {
                    let sample = (0.5 * (step * n as f64).sin()) as f32;
                    for k in 0..CHANNELS {
                        chunk.extend_from_slice(&(if k == channel { sample } else { 0.0 }).to_le_bytes());
                    }
                    n += 1;
                }
                if std::io::Write::write_all(&mut fifo, &chunk).is_err() {
                    return;
                }
            }
        });
        path
    }
}

/// The last `seconds` of a raw F32LE 8-channel file (a `file` PCM's output), interleaved.
pub fn raw_tail(path: &Path, seconds: f64) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let frame = CHANNELS * 4;
    let frames = bytes.len() / frame;
    let wanted = ((seconds * f64::from(RATE)) as usize).min(frames);
    bytes[(frames - wanted) * frame..frames * frame]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

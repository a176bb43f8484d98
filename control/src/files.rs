//! The one way control writes a file of its own (the config, the crew registry, generated
//! secrets and the self-signed TLS key and certificate): into a temp file beside it, created
//! with the final mode before a byte is written, then renamed over (or, for a file that must
//! not be overwritten, linked into place). A crash at any moment leaves the old file or the
//! new one, never a part; `tempfile` does the temp file and the rename.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tempfile::NamedTempFile;

const TEMP_PREFIX: &str = ".partyline-";
const TEMP_SUFFIX: &str = ".tmp";

/// How far a write must reach before it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The disk: the file and the directory entry are fsynced (survives a power loss).
    Disk,
    /// The page cache only: survives a crash of the process, not of the machine.
    PageCache,
}

/// Replaces `path` with `bytes` (mode `mode`), atomically.
pub(crate) fn replace(path: &Path, bytes: &[u8], mode: u32, durability: Durability) -> io::Result<()> {
    let temp = write_temp(path, bytes, mode, durability)?;
    temp.persist(path).map_err(|e| e.error)?;
    sync_dir(path, durability)
}

/// Creates `path` with `bytes` (mode `mode`), durably; `AlreadyExists` if it is there (two
/// processes generating the same secret: the first one wins, whole).
pub(crate) fn create_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let temp = write_temp(path, bytes, mode, Durability::Disk)?;
    temp.persist_noclobber(path).map_err(|e| e.error)?;
    sync_dir(path, Durability::Disk)
}

/// Removes the temp files of writes that a crash interrupted in `dir` (never taken for the file:
/// the rename is what makes a write count), and says which.
pub(crate) fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) && fs::remove_file(entry.path()).is_ok() {
            tracing::info!(file = %entry.path().display(), "removed a temp file left by an interrupted write");
        }
    }
}

/// The directory `path` is in (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

fn write_temp(path: &Path, bytes: &[u8], mode: u32, durability: Durability) -> io::Result<NamedTempFile> {
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(TEMP_SUFFIX)
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(parent_dir(path))?;
    // The umask may have narrowed the mode at creation; the final mode is `mode` exactly.
    temp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    temp.write_all(bytes)?;
    if durability == Durability::Disk {
        temp.as_file().sync_all()?;
    }
    Ok(temp)
}

fn sync_dir(path: &Path, durability: Durability) -> io::Result<()> {
    match durability {
        Durability::Disk => fs::File::open(parent_dir(path))?.sync_all(),
        Durability::PageCache => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replace_sets_the_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        fs::write(&path, "old").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        for durability in [Durability::Disk, Durability::PageCache] {
            replace(&path, b"new", 0o600, durability).expect("replace");
            assert_eq!(fs::read_to_string(&path).expect("read"), "new");
            assert_eq!(mode_of(&path), 0o600);
            assert_eq!(entries(dir.path()), ["f"]);
        }
    }

    #[test]
    fn a_failed_replace_keeps_the_old_file_and_no_temp_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory where the file should be makes the rename fail.
        let path = dir.path().join("f");
        fs::create_dir(&path).expect("mkdir");
        replace(&path, b"new", 0o600, Durability::Disk).expect_err("cannot rename over a directory");
        assert!(path.is_dir());
        assert_eq!(entries(dir.path()), ["f"]);
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret");
        create_new(&path, b"first", 0o600).expect("created");
        let error = create_new(&path, b"second", 0o600).expect_err("exists");
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&path).expect("read"), "first");
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(entries(dir.path()), ["secret"]);
    }

    #[test]
    fn stale_temp_files_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [".partyline-x1.tmp", "config.yaml", ".partyline-keep", "other.tmp"] {
            fs::write(dir.path().join(name), "x").expect("write");
        }
        remove_stale_temp_files(dir.path());
        assert_eq!(entries(dir.path()), [".partyline-keep", "config.yaml", "other.tmp"]);
    }
}

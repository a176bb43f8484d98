//! Installs the browser libraries that `src/web.rs` embeds (`web/node_modules`, pinned by
//! `web/package-lock.json`) when they are missing or older than the lockfile, and rebuilds
//! when a file of the pages is added or changed (rust-embed sees the files it embedded only).

use std::path::Path;
use std::process::Command;

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../web");
    let lockfile = web.join("package-lock.json");
    // npm writes this copy of the lockfile on every install: its age is the install's.
    let installed = web.join("node_modules/.package-lock.json");
    println!("cargo::rerun-if-changed={}", lockfile.display());
    println!("cargo::rerun-if-changed={}", installed.display());
    for pages in ["join", "admin", "common"] {
        println!("cargo::rerun-if-changed={}", web.join(pages).display());
    }
    if !is_older(&installed, &lockfile) {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(&web)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `npm ci` in {}: {e}. Building partyline-control needs npm (Debian: `apt-get install npm`) \
                 to fetch the browser libraries pinned in web/package-lock.json.",
                web.display()
            )
        });
    assert!(status.success(), "`npm ci` in {} failed ({status}); see its output above", web.display());
}

/// Is `file` missing, or older than `than`?
fn is_older(file: &Path, than: &Path) -> bool {
    let modified = |path: &Path| path.metadata().and_then(|m| m.modified()).ok();
    match (modified(file), modified(than)) {
        (Some(file), Some(than)) => file < than,
        _ => true,
    }
}

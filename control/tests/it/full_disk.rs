//! The config directory on a 64 KiB tmpfs: full, then read-only. A write that cannot be made
//! durable is refused with a clear JSON error (507 when the disk is full, a 5xx when the
//! directory is read-only), the old file stays byte-identical on disk and in force in memory,
//! nothing half-written becomes the config (a restart loads the old one), and once space is
//! back the next write succeeds.
//!
//! Needs root (the tests run as root): a test that cannot mount fails, naming why.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Control, LOOPBACK_PLAIN, parse_config};

const TOKEN: &str = "full-disk-test-token";
const SEED: &str = "groups:\n  - name: Stage Left\n    audioBitrate: 96\n  - name: FOH\n";

/// A tmpfs of `size` mounted on a fresh directory; unmounted (lazily) on drop.
#[derive(Debug)]
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(options: &str) -> Tmpfs {
        let parent = tempfile::tempdir().expect("temp dir");
        let dir = parent.path().join("etc-partyline");
        std::fs::create_dir(&dir).expect("mkdir");
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "partyline-test", &dir.to_string_lossy()])
            .output()
            .expect("run mount(8)");
        assert!(
            output.status.success(),
            "cannot mount a tmpfs on {} (this test needs root and mount(8)): {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Tmpfs { dir, _parent: parent }
    }

    fn remount(&self, options: &str) {
        let output = Command::new("mount")
            .args(["-o", &format!("remount,{options}"), &self.dir.to_string_lossy()])
            .output()
            .expect("run mount(8)");
        assert!(output.status.success(), "remount {options}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Fills the file system holding `dir` to the last byte; returns the filler's path.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("create filler");
    let chunk = [0u8; 512];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
    path
}

/// A control whose config file lives in `tmpfs`: started once in its temp dir, then restarted
/// with the config path a symlink into the tmpfs (control writes through the link, to its
/// target's directory). The admin token comes from the environment, so that nothing but the
/// config and control's temp files live on the tmpfs.
async fn control_on(tmpfs: &Tmpfs) -> Control {
    let mut control = Control::builder()
        .config(Some(&format!("{LOOPBACK_PLAIN}{SEED}")))
        .env("PARTYLINE_ADMIN_TOKEN", TOKEN)
        .env("PARTYLINE_BUS", "unix:path=/nonexistent/partyline-test-bus")
        .start()
        .await;
    control.kill();
    let target = tmpfs.dir.join("config.yaml");
    std::fs::copy(control.config_path(), &target).expect("copy the config into the tmpfs");
    std::fs::remove_file(control.config_path()).expect("remove");
    std::os::unix::fs::symlink(&target, control.config_path()).expect("symlink");
    control.restart().await
}

/// The write routes that change the config, each with a body that would change it.
fn writes() -> Vec<(Method, &'static str, Value)> {
    vec![
        (Method::POST, "/admin/groups", json!({ "name": "Monitor World" })),
        (Method::PUT, "/admin/groups/stage-left", json!({ "name": "Stage Right" })),
        (Method::DELETE, "/admin/groups/foh", Value::Null),
        (Method::PUT, "/admin/config/audio", json!({ "defaultBitrate": 128 })),
        (Method::POST, "/admin/audio/device", json!({ "inputDeviceId": "card_in" })),
        (Method::PUT, "/admin/audio/channels/names", json!({ "inputs": { "0": "Stage mic" } })),
    ]
}

async fn send(control: &Control, method: &Method, path: &str, body: &Value) -> (StatusCode, Value) {
    let body = (!body.is_null()).then(|| body.clone());
    control.send(method.clone(), path, body).await
}

/// Every write is refused with `want` and `code`, its error naming `problem`; nothing changes.
async fn every_write_is_refused(control: &Control, want: fn(StatusCode) -> bool, code: &str, problem: &str) {
    let before_text = control.config_text();
    let (_, before_view) = control.get_json("/admin/config").await;
    for (method, path, body) in writes() {
        let (status, answer) = send(control, &method, path, &body).await;
        let what = format!("{method} {path}");
        assert!(want(status), "{what}: {status} {answer}");
        assert_eq!(answer["code"], code, "{what}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(problem), "{what}: the error names the problem ({problem:?}): {error}");
        assert!(error.contains("previous config stays in force"), "{what}: {error}");
        assert_eq!(answer.as_object().map(|o| o.len()), Some(2), "{what}: {answer}");
        assert_eq!(control.config_text(), before_text, "{what}: the file on disk changed");
        let (_, view) = control.get_json("/admin/config").await;
        assert_eq!(view, before_view, "{what}: the config in force changed");
    }
    assert!(control.log_text().contains("config write failed"), "the failure is logged");
}

/// Only the config and control's own temp files are in `dir`; the config is the old text.
fn only_the_old_config(dir: &Path, old: &str, also: &[&str]) {
    assert_eq!(std::fs::read_to_string(dir.join("config.yaml")).expect("read"), old);
    for entry in std::fs::read_dir(dir).expect("readdir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let temp = name.starts_with(".partyline-") && name.ends_with(".tmp");
        assert!(
            name == "config.yaml" || temp || also.contains(&name.as_str()),
            "unexpected file {name} in {}",
            dir.display()
        );
    }
}

#[tokio::test]
async fn a_full_disk_refuses_writes_with_507_and_keeps_the_old_config() {
    let tmpfs = Tmpfs::mount("size=64k,mode=0755");
    let control = control_on(&tmpfs).await;
    let old = control.config_text();
    assert_eq!(control.group_ids().await, ["stage-left", "foh"]);

    let filler = fill(&tmpfs.dir);
    every_write_is_refused(
        &control,
        |s| s == StatusCode::INSUFFICIENT_STORAGE,
        "insufficient_storage",
        "No space left",
    )
    .await;
    only_the_old_config(&tmpfs.dir, &old, &["filler"]);
    assert_eq!(control.group_ids().await, ["stage-left", "foh"], "GET shows the old state");

    // What a restart finds on the full disk is the old config, whole.
    let control = control.restart().await;
    assert_eq!(control.group_ids().await, ["stage-left", "foh"]);
    assert_eq!(control.config_text(), old);

    std::fs::remove_file(filler).expect("free the space");
    let (status, body) = control.post_json("/admin/groups", json!({ "name": "Monitor World" })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let on_disk = parse_config(&control.config_text());
    let names: Vec<&str> = on_disk.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["Stage Left", "FOH", "Monitor World"]);
    nothing_but_the_config(&tmpfs.dir);
}

/// After a successful write, no temp file is left either.
fn nothing_but_the_config(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("readdir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["config.yaml"], "nothing but the config is left");
}

#[tokio::test]
async fn a_read_only_config_dir_refuses_writes_with_a_5xx_and_keeps_the_old_config() {
    // chmod does not stop root (CAP_DAC_OVERRIDE): a read-only remount does.
    let tmpfs = Tmpfs::mount("size=64k,mode=0755");
    let control = control_on(&tmpfs).await;
    let old = control.config_text();

    tmpfs.remount("ro");
    every_write_is_refused(&control, |s| s.is_server_error(), "internal", "Read-only file system").await;
    only_the_old_config(&tmpfs.dir, &old, &[]);
    assert_eq!(control.group_ids().await, ["stage-left", "foh"], "GET shows the old state");

    tmpfs.remount("rw");
    let (status, body) = control.put_json("/admin/groups/stage-left", json!({ "name": "Stage Right" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(control.group_ids().await, ["stage-right", "foh"]);
    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.groups[0].name, "Stage Right");
    nothing_but_the_config(&tmpfs.dir);
}

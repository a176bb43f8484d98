//! Edits of the config file by hand while control runs: picked up by the file watch and on
//! SIGHUP when valid, refused with an error log when not.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Control, LOOPBACK_PLAIN, parse_config, wait_for};

const RELOADED: &str = "config reloaded from disk";
const TIMEOUT: Duration = Duration::from_secs(5);

/// Writes a new file beside the config and renames it over, as most editors save.
fn edit_by_rename(path: &Path, text: &str) {
    let temp = path.with_extension("yaml.swp");
    std::fs::write(&temp, text).expect("write temp");
    std::fs::rename(&temp, path).expect("rename over the config");
}

/// Truncates the config and writes into the same file, as `cat > file` or some editors do.
fn edit_in_place(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write in place");
}

/// A hand-written config: the test listener and the given `groups:` block.
fn hand_written(groups: &str) -> String {
    format!("{LOOPBACK_PLAIN}groups:\n{groups}")
}

/// Log entries at `level` and above newer than `after`, oldest first.
async fn logs(control: &Control, level: &str, after: u64) -> Vec<Value> {
    let (status, body) = control.get_json(&format!("/admin/logs?level={level}&after={after}&limit=1000")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut entries = body["logs"].as_array().expect("logs").clone();
    entries.reverse();
    entries
}

async fn newest_seq(control: &Control) -> u64 {
    logs(control, "trace", 0).await.last().and_then(|e| e["seq"].as_u64()).unwrap_or(0)
}

async fn wait_for_groups(control: &Control, what: &str, want: &[&str]) {
    wait_for(what, TIMEOUT, async || (control.group_ids().await == want).then_some(())).await;
}

async fn create_group(control: &Control, name: &str) {
    let (status, body) = control.post_json("/admin/groups", json!({ "name": name })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn hand_edits_by_rename_and_in_place_are_picked_up() {
    let control = Control::start().await;
    create_group(&control, "Made By The API").await;
    edit_by_rename(control.config_path(), &hand_written("  - name: Saved By Rename\n"));
    wait_for_groups(&control, "the edit saved by rename in GET /admin/groups", &["saved-by-rename"]).await;
    edit_in_place(
        control.config_path(),
        &hand_written("  - name: Saved By Rename\n  - name: Saved In Place\n    audioBitrate: 96\n"),
    );
    wait_for_groups(&control, "the edit saved in place in GET /admin/groups", &["saved-by-rename", "saved-in-place"])
        .await;
    let (_, body) = control.get_json("/admin/groups").await;
    assert_eq!(body["groups"][1]["audioBitrate"], 96, "{body}");

    // The hand edits are the config now: the next API write builds on them.
    create_group(&control, "Made After").await;
    let names: Vec<String> = parse_config(&control.config_text()).groups.into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["Saved By Rename", "Saved In Place", "Made After"]);
}

/// The config file also has a hard link in another directory, and the edit is made through
/// it: the directory watch sees events of the names in its own directory only, so only SIGHUP
/// can bring this edit in.
#[tokio::test]
async fn sighup_reloads_an_edit_the_file_watch_cannot_see() {
    let control = Control::start().await;
    std::fs::write(control.config_path(), hand_written("  - name: Before\n")).expect("write config");
    let elsewhere = control.dir().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let target = elsewhere.join("alias.yaml");
    std::fs::hard_link(control.config_path(), &target).expect("hard link");
    // Restart so that no watch event of the set-up is still pending.
    let control = control.restart().await;
    assert_eq!(control.group_ids().await, ["before"]);

    let after = newest_seq(&control).await;
    edit_in_place(&target, &hand_written("  - name: After Hangup\n"));
    control.signal("HUP");
    wait_for_groups(&control, "the edit after SIGHUP in GET /admin/groups", &["after-hangup"]).await;
    let messages: Vec<String> = logs(&control, "info", after)
        .await
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    let hangup = messages.iter().position(|m| m == "SIGHUP: reloading the config");
    let reloaded = messages.iter().position(|m| m == RELOADED);
    assert!(hangup.is_some() && reloaded > hangup, "SIGHUP, then the reload: {messages:?}");
    assert!(control.log_text().contains("SIGHUP: reloading the config"), "on stderr too");
}

/// (what is wrong, the `groups:` block, what the error must mention).
const INVALID_EDITS: &[(&str, &str, &[&str])] = &[
    ("unknown key", "  - name: Hand\n    colour: red\n", &["colour", "line 7", "partyline.yaml"]),
    ("bad YAML", "  - name: [Hand\n", &["line", "partyline.yaml"]),
    ("colliding names", "  - name: Hand\n  - name: HAND\n", &["groups[1].name", "collides"]),
    // An emptied file (no groups section at all): a botched save, never "all defaults".
    ("emptied file", "", &["empty", "partyline.yaml"]),
];

#[tokio::test]
async fn an_invalid_edit_is_refused_and_the_running_config_stays() {
    let control = Control::start().await;
    create_group(&control, "Kept").await;
    for &(case, groups, mentions) in INVALID_EDITS {
        let before = control.group_ids().await;
        let after = newest_seq(&control).await;
        let text = if groups.is_empty() { String::new() } else { hand_written(groups) };
        edit_by_rename(control.config_path(), &text);
        let refusal = wait_for(&format!("an error log for the {case} edit"), TIMEOUT, async || {
            logs(&control, "error", after).await.pop()
        })
        .await;
        let error = refusal["meta"]["error"].as_str().unwrap_or_default();
        assert!(refusal["message"].as_str().is_some_and(|m| m.contains("refused")), "{case}: {refusal}");
        for mention in mentions {
            assert!(error.contains(mention), "{case}: the error names {mention:?}: {refusal}");
        }
        let stderr = control.log_text();
        assert!(
            stderr.lines().any(|l| l.contains("ERROR") && l.contains(mentions[0])),
            "{case}: an error line on stderr:\n{stderr}"
        );
        assert_eq!(control.group_ids().await, before, "{case}: the running config stays");

        // The next write starts from the running config and replaces the bad file.
        create_group(&control, &format!("After {case}")).await;
        let on_disk: Vec<String> = parse_config(&control.config_text()).groups.iter().map(|g| g.id()).collect();
        assert_eq!(
            on_disk,
            [before, vec![format!("after-{}", case.to_lowercase().replace(" ", "-"))]].concat(),
            "{case}"
        );
    }
}

/// Every write of control's own wakes the file watch; it must find nothing new. A hand edit
/// at the end marks when the watch has caught up: it must be the one reload logged.
#[tokio::test]
async fn control_s_own_writes_are_not_taken_for_reloads() {
    let control = Control::start().await;
    let after = newest_seq(&control).await;
    for n in 0..5 {
        create_group(&control, &format!("Own {n}")).await;
    }
    let (status, body) = control.put_json("/admin/config/audio", json!({ "defaultBitrate": 96 })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    edit_by_rename(control.config_path(), &hand_written("  - name: Marker\n"));
    wait_for_groups(&control, "the marker edit in GET /admin/groups", &["marker"]).await;

    let entries = logs(&control, "info", after).await;
    let count = |message: &str| entries.iter().filter(|e| e["message"] == message).count();
    assert_eq!(count("config updated"), 6, "the API's writes: {entries:#?}");
    assert_eq!(count(RELOADED), 1, "only the hand edit is a reload: {entries:#?}");
}

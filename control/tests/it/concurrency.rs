//! Many clients writing at once: every acknowledged write is in memory and on disk, none lost
//! to another (the config manager serialises writers).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::support::{Control, parse_config};

const CREATORS: usize = 50;
const GROUPS_PER_CREATOR: usize = 20;

/// A request's outcome as the client saw it: what was sent, the status and the body.
type Outcome = (String, StatusCode, Value);

/// The groups the API lists, as (id, name, audioBitrate).
async fn api_groups(control: &Control) -> Vec<(String, String, Option<u64>)> {
    let (status, body) = control.get_json("/admin/groups").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["groups"].as_array().expect("groups").iter().map(group_row).collect()
}

fn group_row(group: &Value) -> (String, String, Option<u64>) {
    let text = |key: &str| group[key].as_str().unwrap_or_else(|| panic!("{key} in {group}")).to_owned();
    // The group's own bitrate, as the file has it: none while it follows the default.
    let own = if group["followsDefaultBitrate"] == true { None } else { group["audioBitrate"].as_u64() };
    (text("id"), text("name"), own)
}

/// The groups in the file on disk, as (id, name, audioBitrate).
fn disk_groups(control: &Control) -> Vec<(String, String, Option<u64>)> {
    let config = parse_config(&control.config_text());
    config.groups.iter().map(|g| (g.id(), g.name.clone(), g.audio_bitrate.map(|b| u64::from(b.get())))).collect()
}

/// Asserts every outcome has status `want`, listing the first few that do not.
fn assert_all(outcomes: &[Outcome], want: StatusCode) {
    let failed: Vec<&Outcome> = outcomes.iter().filter(|(_, status, _)| *status != want).collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests did not get {want}, e.g. {:?}",
        failed.len(),
        outcomes.len(),
        &failed[..failed.len().min(5)]
    );
}

/// Runs one task per worker; each sends its requests one after another.
async fn run_workers(
    control: &Arc<Control>,
    workers: Vec<Vec<(reqwest::Method, String, Option<Value>)>>,
) -> Vec<Outcome> {
    let mut tasks = JoinSet::new();
    for requests in workers {
        let control = Arc::clone(control);
        tasks.spawn(async move {
            let mut outcomes = Vec::new();
            for (method, path, body) in requests {
                let (status, response) = control.send(method.clone(), &path, body).await;
                outcomes.push((format!("{method} {path}"), status, response));
            }
            outcomes
        });
    }
    tasks.join_all().await.into_iter().flatten().collect()
}

fn create(name: &str, audio_bitrate: Option<u64>) -> (reqwest::Method, String, Option<Value>) {
    (reqwest::Method::POST, "/admin/groups".to_owned(), Some(json!({ "name": name, "audioBitrate": audio_bitrate })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_creators_lose_none_of_a_thousand_groups() {
    let control = Arc::new(Control::start().await);
    let workers =
        (0..CREATORS).map(|c| (0..GROUPS_PER_CREATOR).map(|n| create(&format!("c{c}-g{n}"), None)).collect()).collect();

    let started = Instant::now();
    let outcomes = run_workers(&control, workers).await;
    let elapsed = started.elapsed();
    println!(
        "{} concurrent durable creates took {:.2} s ({:.1} ms each)",
        outcomes.len(),
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / outcomes.len() as f64
    );
    assert_all(&outcomes, StatusCode::CREATED);

    let expected: BTreeSet<String> =
        (0..CREATORS).flat_map(|c| (0..GROUPS_PER_CREATOR).map(move |n| format!("c{c}-g{n}"))).collect();
    let in_memory = api_groups(&control).await;
    let on_disk = disk_groups(&control);
    assert_eq!(in_memory.len(), CREATORS * GROUPS_PER_CREATOR, "no group listed twice or lost");
    assert_eq!(in_memory.iter().map(|(id, _, _)| id.clone()).collect::<BTreeSet<_>>(), expected);
    assert_eq!(on_disk, in_memory, "the file holds exactly what the API lists, in the same order");
}

/// Renames, bitrate changes and deletes of existing groups race with creates of new ones; all
/// touch distinct groups, so every one must succeed and the final state is what the responses
/// say, in memory and on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renames_and_deletes_racing_with_creates_lose_nothing() {
    let control = Arc::new(Control::start().await);
    let setup = run_workers(
        &control,
        (0..10).map(|w| (0..10).map(|n| create(&format!("Base {}", w * 10 + n), Some(48))).collect()).collect(),
    )
    .await;
    assert_all(&setup, StatusCode::CREATED);

    let creates = (0..10).map(|w| (0..10).map(|n| create(&format!("New {w}-{n}"), None)).collect());
    let renames = (0..5).map(|w| {
        (0..10)
            .map(|n| {
                let i = w * 10 + n;
                let body = json!({ "name": format!("Renamed {i}"), "audioBitrate": 96 });
                (reqwest::Method::PUT, format!("/admin/groups/base-{i}"), Some(body))
            })
            .collect()
    });
    let deletes = (5..10).map(|w| {
        (0..10).map(|n| (reqwest::Method::DELETE, format!("/admin/groups/base-{}", w * 10 + n), None)).collect()
    });
    let outcomes = run_workers(&control, creates.chain(renames).chain(deletes).collect()).await;

    let mut expected: BTreeSet<(String, String, Option<u64>)> =
        setup.iter().map(|(_, _, body)| group_row(&body["group"])).collect();
    for (request, status, body) in &outcomes {
        assert!(status.is_success(), "{request}: {status} {body}");
        apply(&mut expected, request, body);
    }
    assert_eq!(expected.len(), 150, "100 created, 50 deleted, 50 renamed in place");
    let renamed = expected.iter().filter(|(id, _, bitrate)| id.starts_with("renamed-") && *bitrate == Some(96)).count();
    assert_eq!(renamed, 50, "each rename took its name and bitrate: {expected:?}");
    let in_memory = api_groups(&control).await;
    assert_eq!(in_memory.iter().cloned().collect::<BTreeSet<_>>(), expected);
    assert_eq!(in_memory.len(), expected.len(), "no group listed twice");
    assert_eq!(disk_groups(&control), in_memory, "the file holds exactly what the API lists");
}

/// Applies what a successful response says happened to the expected set of groups.
fn apply(groups: &mut BTreeSet<(String, String, Option<u64>)>, request: &str, body: &Value) {
    let old_id = request.rsplit('/').next().expect("path");
    if request.starts_with("POST") {
        groups.insert(group_row(&body["group"]));
        return;
    }
    let before = groups.len();
    groups.retain(|(id, _, _)| id != old_id);
    assert_eq!(groups.len(), before - 1, "{request} acted on an existing group");
    if request.starts_with("PUT") {
        groups.insert(group_row(&body["group"]));
    } else {
        assert_eq!(body["id"], old_id, "{request}: {body}");
    }
}

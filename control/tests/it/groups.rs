//! Groups: ids derived by the slug rule, collisions, renames, deletes.

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{Control, parse_config};

/// (name sent, expected status, expected id). Data-driven: add a row for a new case.
const CREATE_CASES: &[(&str, u16, &str)] = &[
    ("Scène Côté Jardin", 201, "scene-cote-jardin"),
    ("  Two   Spaces ", 201, "two-spaces"),
    ("UPPER", 201, "upper"),
    ("a--b", 201, "a-b"),
    ("日本", 400, ""),
    ("", 400, ""),
    ("!!!", 400, ""),
    ("upper", 409, ""),
    ("A-B", 409, ""),
    ("x\u{0007}bell", 400, ""),
    ("Stage\u{202E}Left", 400, ""),
    ("zero\u{200B}width", 400, ""),
];

#[tokio::test]
async fn create_derives_ids_and_refuses_empty_or_colliding_ones() {
    let control = Control::start().await;
    for &(name, status, id) in CREATE_CASES {
        let (got, body) = control.post_json("/admin/groups", json!({ "name": name })).await;
        assert_eq!(got.as_u16(), status, "POST {name:?}: {body}");
        if status == 201 {
            assert_eq!(body["group"]["id"], id, "{body}");
            assert_eq!(body["group"]["name"], name.trim());
        } else {
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
        }
    }
    assert_eq!(control.group_ids().await, ["scene-cote-jardin", "two-spaces", "upper", "a-b"]);
    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.groups.len(), 4, "refused creates wrote nothing");
}

#[tokio::test]
async fn rename_changes_the_id_and_refuses_collisions() {
    let control = Control::start().await;
    for name in ["Stage Left", "Stage Right"] {
        assert_eq!(control.post_json("/admin/groups", json!({ "name": name })).await.0, StatusCode::CREATED);
    }
    let (status, body) = control.put_json("/admin/groups/stage-right", json!({ "name": "STAGE left" })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "conflict");

    let (status, body) = control.put_json("/admin/groups/stage-right", json!({ "name": "Scène Côté Cour" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["group"]["id"], "scene-cote-cour");
    assert_eq!(control.group_ids().await, ["stage-left", "scene-cote-cour"]);
    let (_, logs) = control.get_json("/admin/logs?limit=1000").await;
    let renamed = logs["logs"].as_array().expect("logs").iter().find(|l| l["message"] == "group renamed: a new id");
    let ids = renamed.map(|l| (l["meta"]["from"].clone(), l["meta"]["to"].clone()));
    assert_eq!(ids, Some((json!("stage-right"), json!("scene-cote-cour"))), "the log names both ids: {logs}");

    let (status, body) = control.put_json("/admin/groups/stage-right", json!({ "name": "X" })).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the old id is gone: {body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("stage-right")), "names the id: {body}");

    let (status, body) = control.put_json("/admin/groups/stage-left", json!({ "audioBitrate": 96 })).await;
    assert_eq!((status, &body["group"]["audioBitrate"]), (StatusCode::OK, &json!(96)));
    let (status, body) = control.put_json("/admin/groups/stage-left", json!({ "audioBitrate": null })).await;
    assert_eq!(status, StatusCode::OK);
    let group = &body["group"];
    let follows = (&group["audioBitrate"], &group["followsDefaultBitrate"]);
    assert_eq!(follows, (&json!(64), &json!(true)), "null returns to the default: {body}");
}

#[tokio::test]
async fn rename_rewrites_server_audio_user_references_and_delete_refuses_while_referenced() {
    let yaml = format!(
        "{}groups:\n  - name: Stage Left\nserver_audio_users:\n  - name: FOH\n    group: stage-left\n    input_channel: 0\n    output_channel: 1\n",
        crate::support::LOOPBACK_PLAIN
    );
    let control = Control::builder().config(Some(&yaml)).start().await;
    let (status, body) = control.delete("/admin/groups/stage-left").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("FOH")), "names the users: {body}");

    let (status, _) = control.put_json("/admin/groups/stage-left", json!({ "name": "Jardin" })).await;
    assert_eq!(status, StatusCode::OK);
    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.server_audio_users[0].group, "jardin");
}

#[tokio::test]
async fn delete_removes_and_unknown_ids_are_404() {
    let control = Control::start().await;
    control.post_json("/admin/groups", json!({ "name": "Gone Soon" })).await;
    let (status, body) = control.delete("/admin/groups/gone-soon").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], "gone-soon");
    assert!(control.group_ids().await.is_empty());
    let (status, body) = control.delete("/admin/groups/gone-soon").await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
}

/// A program line: the crew only listen to it. No position talks on it, no ad-hoc panel asks to
/// talk on it, and a group a position talks on does not become one; the join page's list and
/// the file say what it is.
#[tokio::test]
async fn a_program_line_is_listen_only_for_the_crew() {
    let control = Control::start().await;
    let (status, show) = control.post_json("/admin/groups", json!({ "name": "Show", "program": true })).await;
    assert_eq!((status, &show["group"]["program"]), (StatusCode::CREATED, &json!(true)), "{show}");
    assert_eq!(control.post_json("/admin/groups", json!({ "name": "Stage" })).await.0, StatusCode::CREATED);
    assert!(parse_config(&control.config_text()).is_program("show"), "program: true in the file");
    let (_, public) = control.get_json("/groups").await;
    assert_eq!(public["groups"][0]["program"], json!(true), "{public}");

    let talks = json!({ "name": "Desk", "listen": ["show", "stage"], "talk": ["stage", "show"] });
    let (status, refused) = control.post_json("/admin/positions", talks).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"].as_str().is_some_and(|e| e.contains("talk[1]") && e.contains("program line")),
        "{refused}"
    );
    let listens = json!({ "name": "Desk", "listen": ["show", "stage"], "talk": ["stage"] });
    assert_eq!(control.post_json("/admin/positions", listens).await.0, StatusCode::CREATED);

    let (status, refused) = control.put_json("/admin/groups/stage", json!({ "program": true })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("Desk")), "names the position: {refused}");
    assert!(!parse_config(&control.config_text()).is_program("stage"), "nothing changed on disk");

    // A token asking to talk on it is refused before anything is registered.
    let ad_hoc = json!({ "username": "Ann", "listen": ["show"], "talk": ["show"] });
    let (status, refused) = control.post_json("/token", ad_hoc).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("program line")), "{refused}");
}

//! [`Probe`], the tests' own Janus API client: raw JSON, one session with a handle on the
//! AudioBridge, an oracle of what Janus holds.

use serde_json::{Value, json};

use super::{Janus, unique};

/// A Janus API client of the test's own, speaking raw JSON (what a browser's janus.js sends):
/// one session with a handle on the AudioBridge.
#[derive(Debug)]
pub struct Probe {
    http: reqwest::Client,
    url: String,
    token: String,
    session: u64,
    handle: u64,
}

/// What a Janus request answered: the whole JSON, or Janus's error code.
pub type Answer = Result<Value, i64>;

impl Probe {
    /// A session with a handle on the AudioBridge, using `token`.
    pub async fn open(janus: &Janus, token: &str) -> Result<Probe, i64> {
        let http = crate::http();
        let mut probe = Probe { http, url: janus.url().to_owned(), token: token.to_owned(), session: 0, handle: 0 };
        probe.session = probe.call("", json!({"janus": "create"})).await?["data"]["id"].as_u64().expect("id");
        let attach = json!({"janus": "attach", "plugin": "janus.plugin.audiobridge"});
        probe.handle = probe.call(&format!("/{}", probe.session), attach).await?["data"]["id"].as_u64().expect("id");
        Ok(probe)
    }

    /// A probe with a fresh token added through the admin API.
    pub async fn admin(janus: &Janus) -> Probe {
        let token = format!("probe-{}", unique());
        janus.add_token(&token).await;
        Probe::open(janus, &token).await.expect("probe session")
    }

    async fn call(&self, path: &str, mut body: Value) -> Answer {
        body["transaction"] = json!(unique());
        body["token"] = json!(self.token);
        let answer: Value = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("Janus reachable")
            .json()
            .await
            .expect("json");
        match answer["janus"].as_str() {
            Some("error") => Err(answer["error"]["code"].as_i64().unwrap_or(-1)),
            _ => Ok(answer),
        }
    }

    /// An AudioBridge request; plugin errors are `Err(error_code)`.
    pub async fn audiobridge(&self, body: Value) -> Answer {
        let answer =
            self.call(&format!("/{}/{}", self.session, self.handle), json!({"janus": "message", "body": body})).await?;
        let data = answer["plugindata"]["data"].clone();
        match data["error_code"].as_i64() {
            Some(code) => Err(code),
            None => Ok(data),
        }
    }

    /// The room ids Janus has.
    pub async fn rooms(&self) -> Vec<String> {
        let list = self.audiobridge(json!({"request": "list"})).await.expect("list");
        let mut rooms: Vec<String> = list["list"]
            .as_array()
            .expect("list")
            .iter()
            .map(|r| r["room"].as_str().expect("room").to_owned())
            .collect();
        rooms.sort();
        rooms
    }

    /// The participant ids of `room` (`Err` with 485 for no such room).
    pub async fn participants(&self, room: &str) -> Result<Vec<String>, i64> {
        let answer = self.audiobridge(json!({"request": "listparticipants", "room": room})).await?;
        Ok(answer["participants"]
            .as_array()
            .expect("participants")
            .iter()
            .map(|p| p["id"].as_str().expect("id").to_owned())
            .collect())
    }

    /// Joins `room` as `id` with the probe's token (signalling only: no PeerConnection). Janus
    /// answers `ack`; the participant is in the room once `listparticipants` shows it.
    pub async fn join(&self, room: &str, id: &str, display: &str) -> Answer {
        let body = json!({"request": "join", "room": room, "id": id, "display": display, "muted": true,
                          "token": self.token, "group": partyline_shared::janus::LOCAL_GROUP});
        self.call(&format!("/{}/{}", self.session, self.handle), json!({"janus": "message", "body": body})).await
    }

    /// [`Probe::join`], then the join's result from the session's events: the `joined` data, or
    /// the AudioBridge's error code (489: the token is not admitted by the room).
    pub async fn join_result(&self, room: &str, id: &str, display: &str) -> Answer {
        self.join(room, id, display).await?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            let url = format!("{}/{}?maxev=1&token={}", self.url, self.session, self.token);
            let event: Value = self.http.get(url).send().await.expect("Janus reachable").json().await.expect("json");
            let data = &event["plugindata"]["data"];
            if let Some(code) = data["error_code"].as_i64() {
                return Err(code);
            }
            if data["audiobridge"] == "joined" && data["id"] == id {
                return Ok(data.clone());
            }
        }
        panic!("no answer to the join of {id} in {room} within 5 s");
    }

    /// Ends the session (the participant leaves its room).
    pub async fn destroy(&self) -> Answer {
        self.call(&format!("/{}", self.session), json!({"janus": "destroy"})).await
    }
}

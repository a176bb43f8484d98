//! WHIP and WHEP against a real Janus, signalling only (the media, with clients written by
//! others, is `web/tests/streams.test.mjs`): a WHIP offer with a token the admin created makes
//! a talk-only participant the admin sees as a WHIP source, ended by its `DELETE` or by its
//! token's revocation; a WHEP offer (receive only) makes a listen-only one whose answer only
//! sends. Every bad request is refused with its status and code, and leaves nothing in Janus
//! or the registry.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Control, wait_for};
use partyline_testkit::janus::Probe;
use partyline_testkit::stack::Stack;

const SOON: Duration = Duration::from_secs(15);
const GROUPS: &str = "  - name: Show\n  - name: Crew\n";

/// A recvonly offer as a WHEP player makes it (ICE credentials and a fingerprint of its own;
/// it never connects).
const WHEP_OFFER: &str = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\na=msid-semantic: WMS\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtcp:9 IN IP4 0.0.0.0\r\na=ice-ufrag:Wh3p\r\na=ice-pwd:whepwhepwhepwhepwhepwh\r\na=ice-options:trickle\r\na=fingerprint:sha-256 6B:8B:5D:EA:59:04:20:23:29:C8:87:1C:CF:CC:11:09:28:EF:FC:7E:92:A6:8D:10:C6:25:05:A1:8E:1B:F6:E9\r\na=setup:actpass\r\na=mid:0\r\na=recvonly\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\n";

/// A stream token of `kind` for `group`: (secret, url).
async fn stream_token(control: &Control, group: &str, kind: &str, name: &str) -> (String, String) {
    let (status, body) =
        control.post_json(&format!("/admin/groups/{group}/stream-tokens"), json!({"kind": kind, "name": name})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    (body["secret"].as_str().expect("secret").to_owned(), body["url"].as_str().expect("url").to_owned())
}

/// A raw request to a WHIP/WHEP URL: (status, headers, body text).
async fn send(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: &str,
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let mut request = partyline_testkit::http().request(method, url).body(body.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.expect("control reachable");
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.expect("a body"))
}

/// The users control registered, pending ones included.
async fn users(control: &Control) -> Vec<Value> {
    let (_, body) = control.get_json("/admin/users?state=all").await;
    body["users"].as_array().cloned().unwrap_or_default()
}

/// A WHIP offer (send only), as a publisher makes it; it never connects.
fn whip_offer() -> String {
    WHEP_OFFER.replace("a=recvonly", "a=sendonly")
}

#[tokio::test]
async fn a_whip_offer_makes_a_talk_only_source_that_ends_with_its_delete_or_its_token() {
    let stack = Stack::start(GROUPS).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let (secret, url) = stream_token(control, "show", "whip", "Vision mixer").await;
    assert!(url.ends_with("/api/whip/show"), "{url}");
    assert!(!control.log_text().contains(&secret), "the secret is in no log line");
    assert!(!control.config_text().contains(&secret), "only its hash is stored");

    let publish = async || {
        let (status, headers, answer) =
            send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), &whip_offer()).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        assert!(headers.get("link").is_none(), "no ICE servers on a LAN-only install");
        assert!(answer.contains("a=recvonly") && answer.contains("opus/48000"), "Janus only receives: {answer}");
        let location = headers["location"].to_str().expect("location").to_owned();
        let source = users(control).await.into_iter().find(|u| u["stream"] == "whip").expect("registered");
        (format!("{}{location}", control.origin), source)
    };
    let (resource, source) = publish().await;
    assert_eq!(source["username"], "Vision mixer (WHIP)");
    let line = &source["lines"][0];
    assert_eq!((&line["groupId"], &line["listen"], &line["talk"]), (&json!("show"), &json!(false), &json!(true)));
    let identity = source["identity"].as_str().expect("identity").to_owned();
    assert!(observer.participants("show").await.expect("Show").contains(&identity));
    let (_, listed) = control.get_json("/admin/groups/show/stream-tokens").await;
    assert_eq!(listed["tokens"][0]["sessions"], 1, "{listed}");

    let (status, _, body) = send(reqwest::Method::DELETE, &resource, Some(&secret), None, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for("the source gone with its DELETE", SOON, async || {
        (!observer.participants("show").await.expect("Show").contains(&identity) && users(control).await.is_empty())
            .then_some(())
    })
    .await;

    // Again, ended by the admin revoking its token.
    let (_, source) = publish().await;
    let identity = source["identity"].as_str().expect("identity").to_owned();
    let token_id = listed["tokens"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(control.delete(&format!("/admin/groups/show/stream-tokens/{token_id}")).await.0, StatusCode::OK);
    wait_for("the source gone with its token", SOON, async || {
        (!observer.participants("show").await.expect("Show").contains(&identity) && users(control).await.is_empty())
            .then_some(())
    })
    .await;
    let (status, _, body) =
        send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), &whip_offer()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked token: {body}");
}

#[tokio::test]
async fn a_whep_offer_is_answered_as_a_listen_only_participant_and_delete_ends_it() {
    // With a relay for off-site players: the answer names it, with a credential of its own.
    let relay = "network:\n  stun: ['stun:stun.example.org']\n  turn:\n    urls: ['turns:turn.example.org:443?transport=tcp']\n    secret: 0123456789abcdef\n";
    let stack = Stack::start_custom(partyline_testkit::janus::Janus::builder(), GROUPS, relay, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let (secret, url) = stream_token(control, "crew", "whep", "Remote director").await;
    let (status, headers, answer) =
        send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), WHEP_OFFER).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(headers["content-type"], "application/sdp");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(answer.starts_with("v=0") && answer.contains("a=sendonly") && answer.contains("opus/48000"), "{answer}");
    let location = headers["location"].to_str().expect("location").to_owned();
    assert!(location.starts_with("/api/whep/crew/"), "{location}");
    let player = users(control).await.into_iter().find(|u| u["stream"] == "whep").expect("registered");
    assert_eq!((&player["lines"][0]["listen"], &player["lines"][0]["talk"]), (&json!(true), &json!(false)));
    let identity = player["identity"].as_str().expect("identity").to_owned();
    let links: Vec<&str> = headers.get_all("link").iter().map(|v| v.to_str().expect("ASCII")).collect();
    assert_eq!(links[0], "<stun:stun.example.org>; rel=\"ice-server\"", "{links:?}");
    let relay = links[1];
    assert!(
        relay.starts_with("<turns:turn.example.org:443?transport=tcp>; rel=\"ice-server\"; username=\""),
        "{relay}"
    );
    assert!(relay.contains(&format!(":{identity}\"; credential=\"")), "a credential for this session: {relay}");
    assert!(observer.participants("crew").await.expect("Crew").contains(&identity));

    let resource = format!("{}{location}", control.origin);
    let (status, _, _) = send(reqwest::Method::DELETE, &resource, None, None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a DELETE needs the token");
    let (status, _, body) = send(reqwest::Method::DELETE, &resource, Some(&secret), None, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for("the player gone", SOON, async || {
        (!observer.participants("crew").await.expect("Crew").contains(&identity) && users(control).await.is_empty())
            .then_some(())
    })
    .await;
    assert_eq!(send(reqwest::Method::DELETE, &resource, Some(&secret), None, "").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_whip_and_whep_requests_are_refused_with_their_code_and_leave_nothing_behind() {
    let stack = Stack::start(GROUPS).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let (whip, whip_url) = stream_token(control, "show", "whip", "OBS").await;
    let (whep, _) = stream_token(control, "crew", "whep", "Player").await;
    let whep_url = control.url("/whep/show");
    let offer = WHEP_OFFER.replace("a=recvonly", "a=sendonly");
    let sdp = Some("application/sdp");
    // (what, url, token, content type, body, status, code)
    let refusals = [
        ("no token", &whip_url, None, sdp, offer.clone(), StatusCode::UNAUTHORIZED, "unauthorized"),
        ("an unknown token", &whip_url, Some("nope"), sdp, offer.clone(), StatusCode::UNAUTHORIZED, "unauthorized"),
        (
            "a WHEP token on WHIP",
            &whip_url,
            Some(whep.as_str()),
            sdp,
            offer.clone(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "another group's token",
            &whep_url,
            Some(whep.as_str()),
            sdp,
            WHEP_OFFER.into(),
            StatusCode::FORBIDDEN,
            "wrong_group",
        ),
        (
            "JSON",
            &whip_url,
            Some(whip.as_str()),
            Some("application/json"),
            "{}".into(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        ("not SDP", &whip_url, Some(whip.as_str()), sdp, "hello".into(), StatusCode::BAD_REQUEST, "bad_sdp"),
        (
            "no audio",
            &whip_url,
            Some(whip.as_str()),
            sdp,
            offer.replace("m=audio", "m=video"),
            StatusCode::BAD_REQUEST,
            "no_audio",
        ),
        (
            "PCMU only",
            &whip_url,
            Some(whip.as_str()),
            sdp,
            offer.replace("opus/48000/2", "PCMU/8000"),
            StatusCode::BAD_REQUEST,
            "unsupported_codec",
        ),
        (
            "a receiving WHIP offer",
            &whip_url,
            Some(whip.as_str()),
            sdp,
            WHEP_OFFER.into(),
            StatusCode::BAD_REQUEST,
            "wrong_direction",
        ),
        (
            // Answered sendrecv, it would get the line's mix with a publish-only token.
            "a sendrecv WHIP offer",
            &whip_url,
            Some(whip.as_str()),
            sdp,
            WHEP_OFFER.replace("a=recvonly", "a=sendrecv"),
            StatusCode::BAD_REQUEST,
            "wrong_direction",
        ),
        (
            "no ICE credentials",
            &whip_url,
            Some(whip.as_str()),
            sdp,
            offer.replace("a=ice-ufrag:Wh3p\r\n", ""),
            StatusCode::BAD_REQUEST,
            "offer_refused",
        ),
    ];
    for (what, url, token, content_type, body, status, code) in refusals {
        let (got, _, answer) = send(reqwest::Method::POST, url, token, content_type, &body).await;
        let answer: Value =
            serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{what}: a JSON error body: {answer}"));
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{what}: {answer}");
    }
    let unknown_group = control.url("/whip/nowhere");
    assert_eq!(send(reqwest::Method::POST, &unknown_group, Some(&whip), sdp, &offer).await.0, StatusCode::NOT_FOUND);
    let (status, _, _) = send(
        reqwest::Method::PATCH,
        &format!("{whip_url}/0123"),
        Some(&whip),
        Some("application/trickle-ice-sdpfrag"),
        "a=end-of-candidates\r\n",
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "no trickle ICE");
    let (status, headers, _) = send(reqwest::Method::OPTIONS, &whip_url, None, None, "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(headers["accept-post"], "application/sdp");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(headers["access-control-expose-headers"].to_str().expect("text").contains("Location"));

    assert!(users(control).await.is_empty(), "nothing registered: {:?}", users(control).await);
    for room in ["show", "crew"] {
        assert_eq!(
            observer.participants(room).await.expect("the room"),
            Vec::<String>::new(),
            "nothing left in {room}"
        );
    }
}

/// A session whose client never connects (its offer's ICE leads nowhere) is removed once its
/// connection has not come up within 10 s, and the log says why.
#[tokio::test]
async fn a_session_that_never_connects_is_removed_and_logged() {
    let stack = Stack::start(GROUPS).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let (secret, url) = stream_token(control, "show", "whip", "Dead end").await;
    let (status, _, answer) =
        send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), &whip_offer()).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let identity = users(control).await[0]["identity"].as_str().expect("identity").to_owned();
    wait_for("the dead session removed", Duration::from_secs(20), async || {
        (users(control).await.is_empty() && !observer.participants("show").await.expect("Show").contains(&identity))
            .then_some(())
    })
    .await;
    assert!(control.log_text().contains("its connection did not come up within 10 s"), "logged with why");
}

/// The admin disconnects a WHIP source like any user (kicked, its token revoked), and a group
/// takes 4 sessions of a kind at once: the fifth is 429 and leaves nothing behind.
#[tokio::test]
async fn the_admin_disconnects_a_source_and_a_group_takes_four_sessions_of_a_kind() {
    let stack = Stack::start(GROUPS).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let (secret, url) = stream_token(control, "show", "whip", "Mixer").await;
    let post = async || send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), &whip_offer()).await;
    for _ in 0..4 {
        assert_eq!(post().await.0, StatusCode::CREATED);
    }
    let (status, _, body) = post().await;
    let body: Value = serde_json::from_str(&body).expect("a JSON error body");
    assert_eq!((status, body["code"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("too_many_sessions")), "{body}");
    let sources = users(control).await;
    assert_eq!(sources.len(), 4, "the refused fifth left nothing: {sources:?}");

    let identity = sources[0]["identity"].as_str().expect("identity").to_owned();
    let (status, _) = control.delete(&format!("/admin/users/{identity}")).await;
    assert_eq!(status, StatusCode::OK);
    wait_for("the disconnected source out of Show", SOON, async || {
        (!observer.participants("show").await.expect("Show").contains(&identity)).then_some(())
    })
    .await;
    wait_for("its session ended: a fifth fits again", SOON, async || {
        (post().await.0 == StatusCode::CREATED).then_some(())
    })
    .await;
}

/// Offers that come together are held to the cap as one after the other would be: sixteen
/// WHIP offers at once give four sessions and twelve refusals, and nothing left of those.
#[tokio::test]
async fn sixteen_offers_at_once_get_four_sessions_and_twelve_refusals() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (secret, url) = stream_token(control, "show", "whip", "Mixer").await;
    let offer = whip_offer();
    let posts = (0..16).map(|_| send(reqwest::Method::POST, &url, Some(&secret), Some("application/sdp"), &offer));
    let statuses: Vec<StatusCode> =
        futures_util::future::join_all(posts).await.into_iter().map(|(s, _, _)| s).collect();
    let created = statuses.iter().filter(|s| **s == StatusCode::CREATED).count();
    let refused = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!((created, refused), (4, 12), "{statuses:?}");
    assert_eq!(users(control).await.len(), 4, "the refused left nothing registered");
}

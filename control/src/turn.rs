//! The ICE servers a panel is given with its token (and a WHIP or WHEP client with its answer,
//! as `Link` headers): the venue's STUN servers and the TURN
//! relay, with a credential of the relay's REST API scheme (coturn's `use-auth-secret`): the
//! username is `EXPIRY:IDENTITY` (Unix seconds, the session's participant identity) and the
//! password the base64 of its HMAC-SHA1 under the secret control shares with the relay. The
//! relay checks both and refuses the credential once `EXPIRY` has passed; the secret itself
//! never leaves control.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use partyline_shared::config::{IceUrl, NetworkConfig, RelayEndpoint};
use ring::hmac;
use serde::Serialize;
use utoipa::ToSchema;

/// One entry of a browser's `RTCConfiguration.iceServers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct IceServer {
    #[schema(example = json!(["turns:turn.example.org:443?transport=tcp"]))]
    pub urls: Vec<String>,
    /// For a relay: `EXPIRY:IDENTITY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// For a relay: the username's HMAC-SHA1 under the relay's shared secret, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

/// What `identity`'s panel is given at `now`: STUN first, then the relay (none of either on a
/// LAN-only install).
pub fn ice_servers(network: &NetworkConfig, identity: &str, now: SystemTime) -> Vec<IceServer> {
    let stun = (!network.stun.is_empty()).then(|| IceServer {
        urls: network.stun.iter().map(|url| url.as_str().to_owned()).collect(),
        username: None,
        credential: None,
    });
    let relay = network.turn.as_ref().map(|turn| {
        let lifetime = Duration::from_secs(turn.credential_seconds.get().into());
        let expiry = (now + lifetime).duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let username = format!("{expiry}:{identity}");
        IceServer {
            urls: turn.urls.iter().map(|url| url.as_str().to_owned()).collect(),
            credential: Some(credential(&turn.secret.0, &username)),
            username: Some(username),
        }
    });
    stun.into_iter().chain(relay).collect()
}

/// `servers` as WHIP and WHEP answer them (RFC 9725, 4.6): one `Link` header value per URL,
/// `rel="ice-server"`, a relay's with its credential.
pub fn link_headers(servers: &[IceServer]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|server| {
            let credential = match (&server.username, &server.credential) {
                (Some(username), Some(credential)) => {
                    format!("; username=\"{username}\"; credential=\"{credential}\"; credential-type=\"password\"")
                }
                _ => String::new(),
            };
            server.urls.iter().map(move |url| format!("<{url}>; rel=\"ice-server\"{credential}"))
        })
        .collect()
}

/// coturn's settings for the config's relay (`partyline-control --print-relay-config`, with
/// which `scripts/run` starts a private coturn, and a start for `/etc/turnserver.conf`): its
/// ports and address from the relay's URLs, the shared secret, `media` (the media server's
/// addresses) as its only peers, and `tls` (control's certificate and key) for `turns:`.
pub fn coturn_config(network: &NetworkConfig, media: &[IpAddr], tls: Option<(&Path, &Path)>) -> Result<String, String> {
    let turn = network.turn.as_ref().ok_or("the config names no relay (`network.turn`)")?;
    let endpoints: Vec<RelayEndpoint> = turn.urls.iter().filter_map(IceUrl::relay_endpoint).collect();
    let mut own: Vec<IpAddr> = endpoints.iter().filter_map(|e| e.host.parse().ok()).collect();
    own.sort();
    own.dedup();
    if let Some(shared) = own.iter().find(|address| media.contains(address)) {
        return Err(format!(
            "the relay's URL names {shared}, the media server's address: coturn never relays to an address it listens on, so give the relay an address of its own"
        ));
    }
    let port = |tls: bool| endpoints.iter().find(|e| e.tls == tls).map(|e| e.port);
    let mut lines = vec![
        "# coturn as partyline's relay: partyline-control --print-relay-config wrote this from its config.".to_owned(),
        "use-auth-secret".to_owned(),
        format!("static-auth-secret={}", turn.secret.0),
        "realm=partyline".to_owned(),
        format!("listening-port={}", port(false).unwrap_or(3478)),
        "fingerprint".into(),
        "no-cli".into(),
        "no-dtls".into(),
        "no-tlsv1".into(),
        "no-tlsv1_1".into(),
        "no-multicast-peers".into(),
        // Not an open relay: to the media server only.
        "denied-peer-ip=0.0.0.0-255.255.255.255".into(),
        "denied-peer-ip=::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".into(),
    ];
    lines.extend(media.iter().map(|address| format!("allowed-peer-ip={address}")));
    lines.extend(own.iter().flat_map(|address| [format!("listening-ip={address}"), format!("relay-ip={address}")]));
    match (port(true), tls) {
        (Some(port), Some((cert, key))) => lines.extend([
            format!("tls-listening-port={port}"),
            format!("cert={}", cert.display()),
            format!("pkey={}", key.display()),
        ]),
        (Some(_), None) => return Err("a `turns:` relay takes control's certificate, and `server.tls` is off".into()),
        (None, _) => lines.push("no-tls".into()),
    }
    Ok(lines.join("\n") + "\n")
}

/// The relay's password for `username`: base64(HMAC-SHA1(secret, username)).
fn credential(secret: &str, username: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    STANDARD.encode(hmac::sign(&key, username.as_bytes()))
}

#[cfg(test)]
mod tests {
    use partyline_shared::Config;

    use super::*;

    #[test]
    fn a_credential_is_the_rest_api_s_hmac_of_expiry_and_identity() {
        // RFC 2202's HMAC-SHA1 test case 2, as coturn computes it: the key "Jefe".
        assert_eq!(credential("Jefe", "what do ya want for nothing?"), "7/zfauXrL6LSdBbV8YTfnCWafHk=");
        let mut config = Config::default();
        assert!(ice_servers(&config.network, "alice-1", SystemTime::now()).is_empty(), "a LAN-only install");
        let text = "network:\n  stun: ['stun:stun.example.org']\n  turn:\n    urls: ['turns:t.example.org:443?transport=tcp']\n    \
                    secret: 0123456789abcdef\n    credentialSeconds: 3600\n";
        config = Config::from_yaml(text).expect("valid");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let servers = ice_servers(&config.network, "alice-1", now);
        assert_eq!(
            servers[0],
            IceServer { urls: vec!["stun:stun.example.org".into()], username: None, credential: None }
        );
        let relay = &servers[1];
        assert_eq!(relay.urls, ["turns:t.example.org:443?transport=tcp"]);
        assert_eq!(relay.username.as_deref(), Some("1800003600:alice-1"), "expires after credentialSeconds");
        assert_eq!(relay.credential.as_deref(), Some(credential("0123456789abcdef", "1800003600:alice-1").as_str()));

        let links = link_headers(&servers);
        assert_eq!(links[0], "<stun:stun.example.org>; rel=\"ice-server\"");
        assert_eq!(
            links[1],
            format!(
                "<turns:t.example.org:443?transport=tcp>; rel=\"ice-server\"; username=\"1800003600:alice-1\"; credential=\"{}\"; credential-type=\"password\"",
                relay.credential.as_deref().expect("a credential")
            )
        );
    }

    #[test]
    fn coturn_is_told_the_secret_its_address_and_the_media_server_as_its_only_peer() {
        let text = "network:\n  turn:\n    urls: ['turns:203.0.113.3:443?transport=tcp', 'turn:203.0.113.3']\n    \
                    secret: 0123456789abcdef\n";
        let config = Config::from_yaml(text).expect("valid");
        let media = [IpAddr::from([203, 0, 113, 1])];
        let tls = Some((Path::new("/c.pem"), Path::new("/k.pem")));
        let coturn = coturn_config(&config.network, &media, tls).expect("settings");
        let lines: Vec<&str> = coturn.lines().collect();
        for line in [
            "use-auth-secret",
            "static-auth-secret=0123456789abcdef",
            "listening-port=3478",
            "tls-listening-port=443",
            "cert=/c.pem",
            "pkey=/k.pem",
            "listening-ip=203.0.113.3",
            "relay-ip=203.0.113.3",
            "denied-peer-ip=0.0.0.0-255.255.255.255",
            "allowed-peer-ip=203.0.113.1",
        ] {
            assert!(lines.contains(&line), "{line} missing from:\n{coturn}");
        }
        assert_eq!(lines.iter().filter(|l| l.starts_with("listening-ip")).count(), 1, "{coturn}");
        assert!(coturn_config(&config.network, &media, None).expect_err("no certificate").contains("server.tls"));
        let shared = [IpAddr::from([203, 0, 113, 3])];
        assert!(coturn_config(&config.network, &shared, tls).expect_err("one address").contains("of its own"));
        let lan_only = Config::default();
        assert!(coturn_config(&lan_only.network, &media, tls).is_err());
    }
}

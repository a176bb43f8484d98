//! A panel's lines on partyline's own rooms (`media.engine: bridged`), as rooms.js joins them:
//! one peer connection for every line, one audio m-line per line in the token's order, offered
//! through control (`POST /api/session/media`), which answers with the rooms' answer; talk keys
//! are `POST /api/session/talk`.

use std::sync::Arc;
use std::time::Instant;

use super::{Engine, JoinError, Joined, PanelLine, Profile, relay_of};
use crate::control_api::{ControlApi, Credentials};
use crate::media::line::direction;
use crate::media::{Offer, Onsets, Relay, Voice};

/// Joins every line of `credentials` with one bundled offer.
pub(super) async fn join(
    api: &ControlApi,
    credentials: &Credentials,
    profile: &Profile,
    voices: &[Arc<Voice>],
    onsets: &Onsets,
) -> Result<Joined, JoinError> {
    // Errors name the panel's first line: the lines share their one connection.
    let room = credentials.lines.first().map(|line| line.room_name.clone()).unwrap_or_default();
    let relay = match relay_of(profile, credentials)? {
        Some((server, tls)) => {
            Some(Relay::allocate(&server, tls).await.map_err(|error| JoinError::Relay { room: room.clone(), error })?)
        }
        None => None,
    };
    let media_error = |error| JoinError::Media { room: room.clone(), error };
    let directions: Vec<_> = credentials.lines.iter().map(|line| direction(line.talk, line.listen)).collect();
    let offer = Offer::new(profile.media_address, &directions, relay).await.map_err(media_error)?;
    let asked = Instant::now();
    let answer = api.media(&credentials.token, &offer.sdp).await.map_err(JoinError::Rooms)?;
    let join_time = asked.elapsed();
    let setups = credentials
        .lines
        .iter()
        .enumerate()
        .map(|(index, line)| {
            let voice = voices.get(index % voices.len().max(1)).cloned();
            PanelLine::setup(line, &line.room_name, voice, profile, onsets)
        })
        .collect();
    let media = offer.start(&answer, profile.link, setups).map_err(media_error)?;
    let lines = credentials
        .lines
        .iter()
        .zip(media)
        .enumerate()
        .map(|(index, (line, media))| PanelLine { line: line.clone(), index, handle: None, media, talking: false })
        .collect();
    Ok(Joined { engine: Engine::Rooms, lines, join_time })
}

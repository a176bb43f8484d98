//! A crew of simulated panels on one server: joined in a ramp, talking in turns (one talker
//! per line at a time, the others listening), heard, and gone (leaving, or vanishing).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::control_api::{ApiError, ControlApi, Lines};
use crate::media::{Heard, Link, Onsets, Voice};
use crate::person::{JoinError, JoinTimes, Person, Profile, Vanished};
use crate::tls::TlsCheck;

/// Lines a panel may have (the tones are told apart up to this many).
pub const MAX_LINES: usize = 8;

/// What the crew joins and how it talks.
#[derive(Debug, Clone)]
pub struct Options {
    /// control's origin (`https://HOST:PORT`).
    pub server: String,
    pub tls: TlsCheck,
    /// Every member's lines: a position, or groups to listen and talk on.
    pub lines: Lines,
    pub pin: Option<String>,
    /// Members are named `PREFIX-1`, `PREFIX-2`, …
    pub name_prefix: String,
    /// The address media sockets bind to: one the media server can reach.
    pub media_address: IpAddr,
    /// How late a packet may come before a listener counts it concealed.
    pub jitter_buffer: Duration,
    /// How long each talker holds a line before the next one takes it.
    pub turn: Duration,
    /// The simulated network between each member's lines and the server.
    pub link: Link,
    /// The loss (%) talkers encode Opus in-band FEC for, as a browser that measured that loss
    /// on its link does (0: none).
    pub fec_percent: u8,
    /// Each line also offers a candidate relayed by the token answer's TURN server (over TLS,
    /// its certificate checked by this), as a browser does; None: host candidates only.
    pub relay: Option<TlsCheck>,
}

/// A crew and what it saw.
#[derive(Debug)]
pub struct Crew {
    api: ControlApi,
    options: Options,
    voices: Vec<Arc<Voice>>,
    onsets: Onsets,
    relay_tls: Option<Arc<rustls::ClientConfig>>,
    pub people: Vec<Person>,
    /// Every join tried so far, in order: how long it took, or why it failed.
    pub joins: Vec<Result<JoinTimes, Arc<JoinError>>>,
    turn: usize,
}

/// What one member's lines heard.
#[derive(Debug, Clone)]
pub struct PersonHeard {
    pub name: String,
    pub identity: String,
    /// (line index, room, heard) for each line that listens.
    pub lines: Vec<(usize, String, Heard)>,
}

impl Crew {
    /// A crew for `options`, its voices encoded; nobody has joined yet.
    pub fn new(options: Options) -> Result<Crew, ApiError> {
        let api = ControlApi::new(&options.server, &options.tls)?;
        let voices = (0..MAX_LINES)
            .map(|index| Voice::encode(crate::media::voice::line_tone(index), options.fec_percent).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ApiError::Url(format!("Opus encoder: {e}")))?;
        let relay_tls = options.relay.as_ref().map(TlsCheck::client_config);
        let onsets = Onsets::default();
        Ok(Crew { api, options, voices, onsets, relay_tls, people: Vec::new(), joins: Vec::new(), turn: 0 })
    }

    /// The onsets its talkers spoke, per room.
    pub fn onsets(&self) -> &Onsets {
        &self.onsets
    }

    /// The profile of the `n`th member (from 1).
    fn profile(&self, n: usize) -> Profile {
        Profile {
            name: format!("{}-{n}", self.options.name_prefix),
            lines: self.options.lines.clone(),
            pin: self.options.pin.clone(),
            media_address: self.options.media_address,
            jitter_buffer: self.options.jitter_buffer,
            link: self.options.link,
            rooms_override: None,
            previous: None,
            relay: self.relay_tls.clone(),
        }
    }

    /// Members whose connection closed for anything but the admin's disconnect (4001) join
    /// again at once, as the page does: a new token resuming the old one's panel key, its
    /// lines joined and media connected. Returns each one's name and time to media connected.
    pub async fn rejoin_lost(&mut self) -> Vec<(String, Result<Duration, Arc<JoinError>>)> {
        let lost: Vec<usize> = (0..self.people.len())
            .filter(|&i| self.people[i].lost().is_some_and(|why| !why.starts_with("4001")))
            .collect();
        let rejoins = lost.iter().map(|&i| {
            let person = &self.people[i];
            let profile =
                Profile { name: person.name.clone(), previous: Some(person.credentials.clone()), ..self.profile(0) };
            let (api, voices, onsets) = (self.api.clone(), self.voices.clone(), self.onsets.clone());
            async move { Person::join(&api, &profile, &voices, &onsets).await }
        });
        let results = join_all(rejoins).await;
        let mut times = Vec::new();
        for (i, result) in lost.into_iter().zip(results) {
            let name = self.people[i].name.clone();
            match result {
                Ok(person) => {
                    times.push((name, Ok(person.times.connected)));
                    self.people[i] = person;
                }
                Err(error) => times.push((name, Err(Arc::new(error)))),
            }
        }
        times
    }

    /// Joins `count` more members, their starts spread evenly over `over`; returns how many
    /// joined (the others' errors are in [`Crew::joins`]).
    pub async fn add(&mut self, count: usize, over: Duration) -> usize {
        let first = self.joins.len() + 1;
        let spacing = over.checked_div(count as u32).unwrap_or_default();
        let started = Instant::now();
        let tasks = (0..count).map(|i| {
            let (api, profile) = (self.api.clone(), self.profile(first + i));
            let (voices, onsets) = (self.voices.clone(), self.onsets.clone());
            let start_at = started + spacing * i as u32;
            tokio::spawn(async move {
                tokio::time::sleep_until(start_at.into()).await;
                Person::join(&api, &profile, &voices, &onsets).await
            })
        });
        let mut joined = 0;
        for result in join_all(tasks.collect::<Vec<_>>()).await {
            match result.expect("a join task panicked") {
                Ok(person) => {
                    self.joins.push(Ok(person.times));
                    self.people.push(person);
                    joined += 1;
                }
                Err(error) => {
                    tracing::warn!(%error, "a simulated panel could not join");
                    self.joins.push(Err(Arc::new(error)));
                }
            }
        }
        joined
    }

    /// Talks in turns for `duration`: on each line one talker at a time, the next member
    /// taking it every [`Options::turn`]; everyone else listens.
    pub async fn talk_for(&mut self, duration: Duration) {
        let end = Instant::now() + duration;
        while Instant::now() < end {
            let turn_started = Instant::now();
            self.next_turn().await;
            let next = (turn_started + self.options.turn).min(end);
            tokio::time::sleep_until(next.into()).await;
        }
    }

    /// Every talk key off.
    pub async fn silence(&mut self) {
        let nobody = HashSet::new();
        join_all(self.people.iter_mut().map(|p| p.talk_only(&nobody))).await;
    }

    /// Who talks where in this turn: line `j`'s talker is member `(turn + j) mod n` among the
    /// `n` who can talk on it. Keys go off everywhere before any goes on.
    async fn next_turn(&mut self) {
        let rooms = self.rooms();
        let mut wanted: Vec<HashSet<String>> = vec![HashSet::new(); self.people.len()];
        for (j, room) in rooms.iter().enumerate() {
            let candidates: Vec<usize> =
                (0..self.people.len()).filter(|&p| self.people[p].talk_rooms().any(|r| r == room)).collect();
            if !candidates.is_empty() {
                wanted[candidates[(self.turn + j) % candidates.len()]].insert(room.clone());
            }
        }
        self.turn += 1;
        let offs: Vec<HashSet<String>> = self
            .people
            .iter()
            .zip(&wanted)
            .map(|(p, w)| p.talking_rooms().filter(|r| w.contains(*r)).map(str::to_owned).collect())
            .collect();
        for phase in [offs, wanted] {
            let results = join_all(self.people.iter_mut().zip(&phase).map(|(p, rooms)| p.talk_only(rooms))).await;
            for error in results.into_iter().filter_map(Result::err) {
                tracing::warn!(%error, "a talk key did not reach the media server");
            }
        }
    }

    /// The rooms of the members' lines, in line order.
    fn rooms(&self) -> Vec<String> {
        let mut rooms: Vec<String> = Vec::new();
        for person in &self.people {
            for line in &person.credentials.lines {
                if !rooms.contains(&line.room_name) {
                    rooms.push(line.room_name.clone());
                }
            }
        }
        rooms
    }

    /// What every member heard since the last call.
    pub async fn heard(&self) -> Vec<PersonHeard> {
        join_all(self.people.iter().map(|p| async move {
            PersonHeard { name: p.name.clone(), identity: p.identity().to_owned(), lines: p.heard().await }
        }))
        .await
    }

    /// The last `count` members leave as panels do.
    pub async fn leave(&mut self, count: usize) {
        let leaving = self.people.split_off(self.people.len().saturating_sub(count));
        for result in join_all(leaving.into_iter().map(Person::leave)).await {
            if let Err(error) = result {
                tracing::warn!(%error, "a simulated panel's leave failed");
            }
        }
    }

    /// The last `count` members drop off the network without a word.
    pub fn vanish(&mut self, count: usize) -> Vec<Vanished> {
        let gone = self.people.split_off(self.people.len().saturating_sub(count));
        gone.into_iter().map(Person::vanish).collect()
    }
}

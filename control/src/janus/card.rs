//! The card's participants: one per group that has server audio users, with an identity and a
//! token that follow from the group alone; registered before bridged is handed a plan, and
//! kept in step with the config's server audio users.

use std::time::Duration;

use partyline_shared::Config;
use partyline_shared::janus::{AllowedAction, JanusError};
use partyline_shared::sync::lock;

use super::Janus;
use crate::secrets::derive;
use crate::users::UserKind;

/// The card's participant id in the room of group `group`.
pub fn card_identity(group: &str) -> String {
    format!("card:{group}")
}

/// The card's participant in one group's room: bridged joins with it, sending the group's
/// server audio users' inputs and receiving the remote crew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardParticipant {
    /// The group (its room).
    pub group: String,
    pub identity: String,
    pub token: String,
    /// The group's server audio users' names.
    pub display: String,
    pub bitrate_kbps: u32,
}

/// How long a removed server audio user keeps its token: bridged tears its branch down in
/// milliseconds and leaves the room with that token; revoked at once, its leave (and the
/// session's destroy) would be refused and the session would linger to Janus's 60 s timeout.
const LEAVE_GRACE: Duration = Duration::from_secs(2);

impl Janus {
    /// Kicks the card's participant out of every room that has one. For a partyline-bridged
    /// that just (re)appeared on the bus: a new process holds no participant, so any of these is
    /// a leftover of a predecessor that died without leaving, which Janus keeps until its session
    /// times out (60 s) and which makes the new process's joins fail ("User ID already exists").
    pub async fn kick_card_participants(&self) -> Result<(), JanusError> {
        let config = self.config.current();
        // One failure must not spare the others: each leftover blocks its own room.
        for participant in self.card_participants(&config)? {
            let identity = &participant.identity;
            let kicked = match self.connect(&self.home()).await {
                Ok(at) => self.kick(&at, &participant.group, identity).await,
                Err(e) => Err(e),
            };
            match kicked {
                Ok(true) => tracing::info!(identity, "kicked the participant a previous partyline-bridged left behind"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(identity, error = %e, "could not kick a previous partyline-bridged's participant");
                }
            }
        }
        Ok(())
    }

    /// The card's participants of `config`: one per group that has server audio users (or that
    /// one's IFB hears), in
    /// the config's order of groups. The identity and token follow from the group's id alone, so
    /// users coming and going never change what the participant joined with.
    pub fn card_participants(&self, config: &Config) -> Result<Vec<CardParticipant>, JanusError> {
        let secret = self.admin_secret()?;
        let participants = config
            .groups
            .iter()
            .filter_map(|group| {
                let id = group.id();
                // Those who send into the group, and those whose IFB hears it.
                let names: Vec<&str> =
                    config.server_audio_users.iter().filter(|u| u.uses_group(&id)).map(|u| u.name.as_str()).collect();
                if names.is_empty() {
                    return None;
                }
                Some(CardParticipant {
                    identity: card_identity(&id),
                    token: derive(secret, &format!("partyline card participant token:{id}")),
                    display: names.join(", "),
                    bitrate_kbps: config.group_bitrate(group).get(),
                    group: id,
                })
            })
            .collect();
        Ok(participants)
    }

    /// bridged says the card started or stopped talking in `room` (its `Talking` signal).
    pub fn card_talking(&self, room: &str, talking: bool) {
        self.users.talking(room, &card_identity(room), talking);
    }

    /// Whether the admin muted the card on `group`'s line.
    pub fn card_muted(&self, group: &str) -> bool {
        self.users.muted_by_admin(&card_identity(group), group)
    }

    /// Where the card's participants are, by the media engine. On partyline's own rooms
    /// (`Some(in_rooms)`, the groups whose card bridged says is in its room) they are bridged's
    /// own, not Janus's: each server audio user is connected while its group's card is in the
    /// room, pending otherwise, and Janus's lists never judge it. On Janus (`None`, the engine
    /// switched back), Janus's events and lists judge them again.
    pub fn cards_follow_engine(&self, in_rooms: Option<&[&str]>) {
        for user in self.users.list().into_iter().filter(|u| u.kind == UserKind::Server) {
            let Some(in_rooms) = in_rooms else {
                if user.on_rooms {
                    self.users.set_on_rooms(&user.identity, false);
                }
                continue;
            };
            let room = user.first_group();
            self.users.set_on_rooms(&user.identity, true);
            if in_rooms.contains(&room) {
                self.users.joined(room, &user.identity);
            } else {
                self.users.left(room, &user.identity, "the card is not in partyline's room");
            }
        }
    }

    /// Registers the card's participants of `config` and their Janus tokens (those not
    /// registered yet); returns their identities. The BridgeManager calls it before it hands
    /// bridged a plan, so that a new participant's first request to Janus is never refused for an
    /// unknown token.
    pub async fn admit_server_users(&self, config: &Config) -> Result<Vec<String>, JanusError> {
        let _admitting = self.admitting.lock().await;
        self.admit_server_users_locked(config).await
    }

    /// [`Self::admit_server_users`], for a caller that holds `admitting`.
    async fn admit_server_users_locked(&self, config: &Config) -> Result<Vec<String>, JanusError> {
        let mut identities = Vec::new();
        for participant in self.card_participants(config)? {
            let CardParticipant { identity, token, display, group, .. } = participant;
            // The identity is the group's: a registered participant is in its room's list.
            if self.users.upsert_server(&identity, &display, &group, &token) {
                let home = self.home();
                self.register_token(&home, &token).await?;
                let at = self.connect(&home).await?;
                self.allow(&at, &group, AllowedAction::Add, vec![token]).await?;
            }
            identities.push(identity);
        }
        Ok(identities)
    }

    /// Keeps the registry's server audio users (and their Janus tokens) in step with the config.
    /// A removed one keeps its token for [`LEAVE_GRACE`], so that bridged leaves the room and
    /// ends its session with it; then it is kicked (should it still be there: its participant
    /// would block a user of the same name) and its token revoked.
    ///
    /// What is removed is decided on the newest config, under `admitting`, not on the snapshot
    /// the pass started with: a user added meanwhile has had its token admitted and its plan
    /// pushed to bridged, and the pass would revoke that token (bridged's join refused, 403,
    /// and retried 500 ms later: 2 of 300 joins in the bench did so).
    pub(super) async fn sync_server_users(&self) -> Result<(), JanusError> {
        let admitting = self.admitting.lock().await;
        let config = self.config.current();
        let identities = self.admit_server_users_locked(&config).await?;
        let removed = self.users.take_servers_except(&identities);
        let due = {
            let mut leaving = lock(&self.leaving);
            for gone in removed {
                tracing::info!(identity = gone.identity, "server audio user removed");
                leaving.push((gone, std::time::Instant::now()));
            }
            // One added again meanwhile (same name: same identity and token) keeps its token.
            leaving.retain(|(user, _)| self.users.get(&user.identity).is_none());
            let (due, waiting): (Vec<_>, Vec<_>) = leaving.drain(..).partition(|(_, at)| at.elapsed() >= LEAVE_GRACE);
            *leaving = waiting;
            due
        };
        drop(admitting);
        for (gone, _) in due {
            // Normally gone already: bridged left with its token during the grace.
            let kicked = match self.connect(&self.home()).await {
                Ok(at) => self.kick(&at, gone.first_group(), &gone.identity).await,
                Err(e) => Err(e),
            };
            match kicked {
                Ok(true) => tracing::info!(
                    identity = gone.identity,
                    "a removed server audio user was still in its room: kicked"
                ),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(identity = gone.identity, error = %e, "could not kick a removed server audio user");
                }
            }
            self.revoke(&gone).await;
        }
        Ok(())
    }
}

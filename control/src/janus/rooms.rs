//! Rooms from groups: what each room should be, and what to do to get there.

use std::collections::HashMap;

use partyline_shared::Config;
use partyline_shared::config::Bitrate;
use partyline_shared::janus::{
    LOCAL_GROUP, RoomListing, RoomSpec, TALK_LEVEL_DBOV, TALK_WINDOW_PACKETS, TRUNK_GROUP, prebuffer_packets,
};

use crate::users::DirectRoom;

/// The rooms the config asks for, one per group, then one per open direct line.
pub fn desired(config: &Config, directs: &[DirectRoom], admin_key: &str, secret_key: &str) -> Vec<RoomSpec> {
    let groups = config.groups.iter().map(|group| (group.id(), group.name.clone(), config.group_bitrate(group)));
    let directs = directs.iter().map(|direct| {
        let description = format!("Direct: {} - {}", direct.ends[0].1, direct.ends[1].1);
        (direct.room.clone(), description, config.audio.default_bitrate)
    });
    groups
        .chain(directs)
        .map(|(room, description, bitrate)| spec(config, room, description, bitrate, admin_key, secret_key))
        .collect()
}

fn spec(
    config: &Config,
    room: String,
    description: String,
    bitrate: Bitrate,
    admin_key: &str,
    secret_key: &str,
) -> RoomSpec {
    RoomSpec {
        secret: room_secret(secret_key, &room),
        room,
        description,
        admin_key: admin_key.to_owned(),
        sampling_rate: config.audio.sample_rate.get(),
        default_prebuffering: prebuffer_packets(config.audio.jitter_buffer_ms.get()),
        default_bitrate: bitrate.get() * 1000,
        // What protects a listener on a lossy link: FEC in every mix (the panels offer it).
        default_expectedloss: config.audio.expected_loss_percent.get(),
        // Voice activity, decided over 10 packets (200 ms), for whoever wants to know who
        // speaks (the panels' lamps follow the talk keys: muted or not in the room).
        audiolevel_event: true,
        audio_active_packets: TALK_WINDOW_PACKETS,
        audio_level_average: TALK_LEVEL_DBOV,
        permanent: false,
        // bridged's group participants (`bridge.transport: rtp`); crew clients cannot
        // ask for plain RTP through the `/janus` proxy.
        allow_rtp_participants: true,
        groups: vec![LOCAL_GROUP.to_owned(), TRUNK_GROUP.to_owned()],
    }
}

/// A room's secret (needed to kick and destroy), derived from a key control holds, so it
/// never has to be stored and survives a restart of control.
pub fn room_secret(key: &str, room: &str) -> String {
    crate::secrets::derive(key, &format!("partyline room secret:{room}"))
}

/// What reconciliation does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RoomPlan {
    pub create: Vec<RoomSpec>,
    /// Empty rooms whose spec changed (or is unknown): destroyed and created again.
    pub recreate: Vec<RoomSpec>,
    pub destroy: Vec<String>,
}

/// Compares the rooms the config asks for with those Janus has. A room with participants
/// whose spec changed is left alone until it is empty (recreating it would cut everyone
/// off); `created` records what control created.
pub fn plan(desired: &[RoomSpec], existing: &[RoomListing], created: &mut HashMap<String, RoomSpec>) -> RoomPlan {
    let mut plan = RoomPlan::default();
    for spec in desired {
        match existing.iter().find(|r| r.room == spec.room) {
            None => plan.create.push(spec.clone()),
            Some(_) if created.get(&spec.room) == Some(spec) => {}
            Some(listing) if listing.num_participants == 0 => plan.recreate.push(spec.clone()),
            Some(_) => {
                tracing::debug!(room = spec.room, "room settings changed; applied when the room is next empty");
            }
        }
    }
    plan.destroy =
        existing.iter().filter(|r| !desired.iter().any(|d| d.room == r.room)).map(|r| r.room.clone()).collect();
    created.retain(|room, _| desired.iter().any(|d| &d.room == room));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use partyline_shared::config::{Bitrate, Group, JitterBufferMs};

    fn config() -> Config {
        let mut config = Config::default();
        let bitrate = |kbps: u32| Bitrate::try_from(kbps).expect("a bitrate");
        config.groups = vec![Group::new("Stage Left", None), Group::new("FOH", Some(bitrate(96)))];
        config.audio.jitter_buffer_ms = JitterBufferMs::try_from(40u32).expect("a buffer");
        config
    }

    fn listing(room: &str, participants: u32) -> RoomListing {
        RoomListing { room: room.into(), sampling_rate: 48_000, num_participants: participants }
    }

    #[test]
    fn desired_rooms_follow_groups() {
        let direct =
            DirectRoom { room: "direct-0a".into(), ends: [("a-1".into(), "Ann".into()), ("b-1".into(), "Ben".into())] };
        let rooms = desired(&config(), &[direct], "key", "secret");
        assert_eq!(rooms.iter().map(|r| r.room.as_str()).collect::<Vec<_>>(), ["stage-left", "foh", "direct-0a"]);
        assert_eq!((rooms[2].description.as_str(), rooms[2].default_bitrate), ("Direct: Ann - Ben", 64_000));
        assert_eq!((rooms[0].default_bitrate, rooms[1].default_bitrate), (64_000, 96_000));
        assert_eq!(rooms[0].default_prebuffering, 2);
        assert!(rooms.iter().all(|r| r.default_expectedloss == 10), "FEC in every room's mixes");
        assert_ne!(rooms[0].secret, rooms[1].secret);
        assert_eq!(rooms[0].secret, room_secret("secret", "stage-left"), "derived, stable");
    }

    #[test]
    fn plan_creates_destroys_and_defers() {
        let rooms = desired(&config(), &[], "key", "secret");
        let mut created = HashMap::new();
        let first = plan(&rooms, &[listing("old", 0)], &mut created);
        assert_eq!(first.create.len(), 2);
        assert_eq!(first.destroy, ["old"]);

        created.extend(rooms.iter().map(|r| (r.room.clone(), r.clone())));
        let existing = [listing("stage-left", 3), listing("foh", 0)];
        assert_eq!(plan(&rooms, &existing, &mut created), RoomPlan::default(), "nothing to do");

        let mut changed = config();
        changed.audio.default_bitrate = Bitrate::try_from(32u32).expect("a bitrate");
        let rooms = desired(&changed, &[], "key", "secret");
        let later = plan(&rooms, &existing, &mut created);
        assert!(later.recreate.is_empty(), "foh has its own bitrate; stage-left is busy: {later:?}");
        let empty = [listing("stage-left", 0), listing("foh", 0)];
        assert_eq!(plan(&rooms, &empty, &mut created).recreate.len(), 1, "applied once empty");
    }
}

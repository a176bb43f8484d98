//! The edits the API makes to a config: each takes the config by `&mut` and either changes it
//! or says why not. [`ConfigManager::update`](super::ConfigManager::update) runs them on a
//! copy, so a refused edit changes nothing.

use std::collections::BTreeMap;

use partyline_shared::Config;
use partyline_shared::config::{
    Bitrate, Channel, ChannelNames, DeviceSampleRate, DeviceSelection, Group, Ifb, JitterBufferMs, Occupants, PinHash,
    Position, SampleRate, ServerAudioUser, check_entity_name, check_group_id_not_direct, check_ifb, check_lines,
    check_talk_to,
};

/// Why an edit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("{field}: {message}")]
    Invalid { field: &'static str, message: String },
    #[error("no {kind} has id {id:?}")]
    NotFound { kind: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
}

/// A field of a partial update: absent (`None`: keep), or present with a value, which may
/// itself be `null` where the field is optional.
pub type Patch<T> = Option<T>;

/// Checks a new group or user name and returns it trimmed, with its id.
fn entity_name(field: &'static str, name: &str) -> Result<(String, String), EditError> {
    let name = name.trim();
    let id = check_entity_name(name).map_err(|message| EditError::Invalid { field, message })?;
    Ok((name.to_owned(), id))
}

fn ensure_group_id_free(config: &Config, id: &str, except: Option<usize>) -> Result<(), EditError> {
    check_group_id_not_direct(id).map_err(|message| EditError::Invalid { field: "name", message })?;
    match config.group(id) {
        Some((index, existing)) if Some(index) != except => {
            Err(EditError::Conflict(format!("a group with id {id:?} already exists ({:?})", existing.name)))
        }
        _ => Ok(()),
    }
}

/// Adds a group; its id is the slug of its name and must be free.
pub fn create_group(
    config: &mut Config,
    name: &str,
    audio_bitrate: Option<Bitrate>,
    pin: Option<PinHash>,
) -> Result<Group, EditError> {
    let (name, id) = entity_name("name", name)?;
    ensure_group_id_free(config, &id, None)?;
    let mut group = Group::new(name, audio_bitrate);
    group.pin = pin;
    config.groups.push(group.clone());
    Ok(group)
}

/// Renames a group, changes its bitrate or its PIN. A rename changes the id; the server audio
/// users and positions that pointed at the old id are pointed at the new one in the same write.
pub fn update_group(
    config: &mut Config,
    id: &str,
    name: Patch<&str>,
    audio_bitrate: Patch<Option<Bitrate>>,
    pin: Patch<Option<PinHash>>,
) -> Result<Group, EditError> {
    let (index, _) = config.group(id).ok_or_else(|| not_found("group", id))?;
    if let Some(name) = name {
        let (name, new_id) = entity_name("name", name)?;
        ensure_group_id_free(config, &new_id, Some(index))?;
        config.groups[index].name = name;
        for user in &mut config.server_audio_users {
            user.rename_group(id, &new_id);
        }
        let lists = config.positions.iter_mut().flat_map(|p| p.listen.iter_mut().chain(p.talk.iter_mut()));
        for group in lists.filter(|g| *g == id) {
            group.clone_from(&new_id);
        }
    }
    // The original system's group form sends the group's bitrate back with every save: the
    // value it already follows (the default) is no change, and pinning it would stop the group
    // following a later change of the default.
    let following = config.groups[index].audio_bitrate.is_none();
    let default = config.audio.default_bitrate;
    if let Some(audio_bitrate) = audio_bitrate.filter(|b| !(following && *b == Some(default))) {
        config.groups[index].audio_bitrate = audio_bitrate;
    }
    if let Some(pin) = pin {
        config.groups[index].pin = pin;
    }
    Ok(config.groups[index].clone())
}

/// Makes a group a program line (the crew only listen to it) or a line like any other; refused
/// while a position talks on it.
pub fn set_program(config: &mut Config, id: &str, program: bool) -> Result<Group, EditError> {
    let (index, _) = config.group(id).ok_or_else(|| not_found("group", id))?;
    let talking: Vec<&str> =
        config.positions.iter().filter(|p| p.talk.iter().any(|g| g == id)).map(|p| p.name.as_str()).collect();
    if program && !talking.is_empty() {
        return Err(EditError::Conflict(format!(
            "group {id:?} is a talk line of positions: {}; a program line is listen only: change them first",
            talking.join(", ")
        )));
    }
    config.groups[index].program = program;
    Ok(config.groups[index].clone())
}

/// Removes a group, unless server audio users send into it or positions hold it.
pub fn delete_group(config: &mut Config, id: &str) -> Result<Group, EditError> {
    let (index, _) = config.group(id).ok_or_else(|| not_found("group", id))?;
    let users: Vec<&str> =
        config.server_audio_users.iter().filter(|u| u.uses_group(id)).map(|u| u.name.as_str()).collect();
    if !users.is_empty() {
        return Err(EditError::Conflict(format!(
            "group {id:?} is used by server audio users: {}; move or delete them first",
            users.join(", ")
        )));
    }
    let holds = |p: &&Position| p.listen.iter().chain(&p.talk).any(|g| g == id);
    let positions: Vec<&str> = config.positions.iter().filter(holds).map(|p| p.name.as_str()).collect();
    if !positions.is_empty() {
        return Err(EditError::Conflict(format!(
            "group {id:?} is a line of positions: {}; change or delete them first",
            positions.join(", ")
        )));
    }
    Ok(config.groups.remove(index))
}

/// A position as the API sends it.
#[derive(Debug, Clone, Default)]
pub struct PositionFields {
    pub name: Option<String>,
    pub listen: Option<Vec<String>>,
    pub talk: Option<Vec<String>>,
    /// `Some(None)` removes the PIN.
    pub pin: Patch<Option<PinHash>>,
    /// `Some(None)` removes the site.
    pub site: Patch<Option<String>>,
    pub announce: Option<bool>,
    /// Person keys: other positions' ids.
    pub talk_to: Option<Vec<String>>,
    /// One crew member at a time, or many.
    pub occupants: Option<Occupants>,
}

fn ensure_position_id_free(config: &Config, id: &str, except: Option<usize>) -> Result<(), EditError> {
    match config.position(id) {
        Some((index, existing)) if Some(index) != except => {
            Err(EditError::Conflict(format!("a position with id {id:?} already exists ({:?})", existing.name)))
        }
        _ => Ok(()),
    }
}

fn check_position_lines(config: &Config, position: &Position) -> Result<(), EditError> {
    let checked = check_lines(&position.listen, &position.talk, |g| config.group(g).is_some())
        .and_then(|()| config.check_program_talk(&position.talk))
        .and_then(|()| position.check_announce());
    checked.map_err(|(field, message)| {
        if field == "announce" {
            return EditError::Invalid { field: "announce", message };
        }
        // The list named, and the entry when the fault is one entry's (`talk[1]: …`).
        let list = if field.starts_with("talk") { "talk" } else { "listen" };
        let message = if field == list { message } else { format!("{field}: {message}") };
        EditError::Invalid { field: list, message }
    })
}

/// Adds a position; its id is the slug of its name and must be free.
pub fn create_position(config: &mut Config, fields: PositionFields) -> Result<Position, EditError> {
    let (name, id) = entity_name("name", fields.name.as_deref().unwrap_or_default())?;
    ensure_position_id_free(config, &id, None)?;
    let position = Position {
        name,
        listen: fields.listen.unwrap_or_default(),
        talk: fields.talk.unwrap_or_default(),
        pin: fields.pin.flatten(),
        site: fields.site.flatten(),
        announce: fields.announce.unwrap_or_default(),
        talk_to: fields.talk_to.unwrap_or_default(),
        occupants: fields.occupants.unwrap_or_default(),
    };
    check_position_lines(config, &position)?;
    check_position_talk_to(&position, |id| config.position(id).is_some())?;
    config.positions.push(position.clone());
    Ok(position)
}

/// Changes a position; absent fields keep their value.
pub fn update_position(config: &mut Config, id: &str, fields: PositionFields) -> Result<Position, EditError> {
    let (index, _) = config.position(id).ok_or_else(|| not_found("position", id))?;
    let mut position = config.positions[index].clone();
    if let Some(name) = fields.name {
        let (name, new_id) = entity_name("name", &name)?;
        ensure_position_id_free(config, &new_id, Some(index))?;
        position.name = name;
    }
    position.listen = fields.listen.unwrap_or(position.listen);
    position.talk = fields.talk.unwrap_or(position.talk);
    if let Some(pin) = fields.pin {
        position.pin = pin;
    }
    if let Some(site) = fields.site {
        position.site = site;
    }
    position.announce = fields.announce.unwrap_or(position.announce);
    position.talk_to = fields.talk_to.unwrap_or(position.talk_to);
    position.occupants = fields.occupants.unwrap_or(position.occupants);
    check_position_lines(config, &position)?;
    let (old_id, new_id) = (config.positions[index].id(), position.id());
    check_position_talk_to(&position, |id| id == new_id || (id != old_id && config.position(id).is_some()))?;
    config.positions[index] = position.clone();
    // Other positions' person keys follow a renamed position.
    for other in &mut config.positions {
        for to in other.talk_to.iter_mut().filter(|to| **to == old_id) {
            new_id.clone_into(to);
        }
    }
    Ok(position)
}

/// A position's person keys name other positions (`known`), each once.
fn check_position_talk_to(position: &Position, known: impl Fn(&str) -> bool) -> Result<(), EditError> {
    check_talk_to(&position.id(), &position.talk_to, known)
        .map_err(|(field, message)| EditError::Invalid { field: "talkTo", message: format!("{field}: {message}") })
}

/// Removes a position (crew members who joined with it keep their lines) and the person keys to it.
pub fn delete_position(config: &mut Config, id: &str) -> Result<Position, EditError> {
    let (index, _) = config.position(id).ok_or_else(|| not_found("position", id))?;
    let position = config.positions.remove(index);
    // Its person keys on other positions go with it.
    for other in &mut config.positions {
        other.talk_to.retain(|to| *to != position.id());
    }
    Ok(position)
}

/// `PUT /admin/config/audio`.
pub fn set_audio(
    config: &mut Config,
    sample_rate: Patch<SampleRate>,
    default_bitrate: Patch<Bitrate>,
    jitter_buffer_ms: Patch<JitterBufferMs>,
) {
    let audio = &mut config.audio;
    audio.sample_rate = sample_rate.map_or(audio.sample_rate, Into::into);
    audio.default_bitrate = default_bitrate.unwrap_or(audio.default_bitrate);
    audio.jitter_buffer_ms = jitter_buffer_ms.unwrap_or(audio.jitter_buffer_ms);
}

/// `POST /admin/audio/device`: `None` keeps a field, `Some(None)` selects the default device.
pub fn set_device(
    config: &mut Config,
    input_device_id: Patch<Option<String>>,
    output_device_id: Patch<Option<String>>,
    sample_rate: Patch<DeviceSampleRate>,
) -> Result<DeviceSelection, EditError> {
    let device = &mut config.audio.device;
    for (field, patch, slot) in [
        ("inputDeviceId", input_device_id, &mut device.input_device_id),
        ("outputDeviceId", output_device_id, &mut device.output_device_id),
    ] {
        if let Some(id) = patch {
            if let Some(id) = &id
                && (id.trim().is_empty() || id.len() > 256 || id.chars().any(char::is_control))
            {
                return Err(EditError::Invalid {
                    field,
                    message: "must be a device identifier from /admin/devices/list, or null for the default device"
                        .into(),
                });
            }
            *slot = id;
        }
    }
    device.sample_rate = sample_rate.unwrap_or(device.sample_rate);
    Ok(device.clone())
}

/// `PUT /admin/audio/channels/names`: sets the names given, keeps the others.
pub fn set_channel_names(
    config: &mut Config,
    inputs: Option<&BTreeMap<String, String>>,
    outputs: Option<&BTreeMap<String, String>>,
) -> Result<ChannelNames, EditError> {
    let names = &mut config.audio.channel_names;
    for (field, patch, map) in [("inputs", inputs, &mut names.inputs), ("outputs", outputs, &mut names.outputs)] {
        if let Some(patch) = patch {
            map.merge(patch).map_err(|message| EditError::Invalid { field, message })?;
        }
    }
    Ok(names.clone())
}

/// A server audio user as the API sends it.
#[derive(Debug, Clone)]
pub struct ServerUserFields {
    pub name: String,
    pub group: String,
    pub input_channel: Channel,
    pub output_channel: Option<Channel>,
    pub ifb: Option<Ifb>,
}

/// Changes to a server audio user; absent fields keep their value.
#[derive(Debug, Default)]
pub struct ServerUserPatch {
    pub name: Patch<String>,
    pub group: Patch<String>,
    pub input_channel: Patch<Channel>,
    pub output_channel: Patch<Option<Channel>>,
    pub ifb: Patch<Option<Ifb>>,
}

/// A user's IFB against the config: needs the user's output and groups that exist.
fn ensure_ifb_valid(config: &Config, user: &ServerAudioUser) -> Result<(), EditError> {
    let Some(ifb) = &user.ifb else { return Ok(()) };
    check_ifb(ifb, user.output_channel.is_some(), |g| config.group(g).is_some()).map_err(|(key, message)| {
        let field = match key {
            Some("interrupt") => "ifb.interrupt",
            Some(_) => "ifb.program",
            None => "ifb",
        };
        EditError::Invalid { field, message }
    })
}

fn ensure_group_exists(config: &Config, group: &str) -> Result<(), EditError> {
    match config.group(group) {
        Some(_) => Ok(()),
        None => Err(EditError::Invalid { field: "group", message: format!("no group has id {group:?}") }),
    }
}

fn ensure_server_user_id_free(config: &Config, id: &str, except: Option<usize>) -> Result<(), EditError> {
    match config.server_audio_user(id) {
        Some((index, existing)) if Some(index) != except => {
            Err(EditError::Conflict(format!("a server audio user with id {id:?} already exists ({:?})", existing.name)))
        }
        _ => Ok(()),
    }
}

/// Adds a server audio user; its id is the slug of its name and must be free.
pub fn create_server_user(config: &mut Config, fields: ServerUserFields) -> Result<ServerAudioUser, EditError> {
    let (name, id) = entity_name("name", &fields.name)?;
    ensure_server_user_id_free(config, &id, None)?;
    ensure_group_exists(config, &fields.group)?;
    let user = ServerAudioUser {
        name,
        group: fields.group,
        input_channel: fields.input_channel,
        output_channel: fields.output_channel,
        ifb: fields.ifb,
    };
    ensure_ifb_valid(config, &user)?;
    config.server_audio_users.push(user.clone());
    Ok(user)
}

/// Changes a server audio user; absent fields keep their value.
pub fn update_server_user(config: &mut Config, id: &str, patch: ServerUserPatch) -> Result<ServerAudioUser, EditError> {
    let (index, _) = config.server_audio_user(id).ok_or_else(|| not_found("server audio user", id))?;
    if let Some(name) = patch.name {
        let (name, new_id) = entity_name("name", &name)?;
        ensure_server_user_id_free(config, &new_id, Some(index))?;
        config.server_audio_users[index].name = name;
    }
    if let Some(group) = patch.group {
        ensure_group_exists(config, &group)?;
        config.server_audio_users[index].group = group;
    }
    let mut user = config.server_audio_users[index].clone();
    user.input_channel = patch.input_channel.unwrap_or(user.input_channel);
    user.output_channel = patch.output_channel.unwrap_or(user.output_channel);
    user.ifb = patch.ifb.unwrap_or(user.ifb);
    ensure_ifb_valid(config, &user)?;
    config.server_audio_users[index] = user.clone();
    Ok(user)
}

/// Removes a server audio user.
pub fn delete_server_user(config: &mut Config, id: &str) -> Result<ServerAudioUser, EditError> {
    let (index, _) = config.server_audio_user(id).ok_or_else(|| not_found("server audio user", id))?;
    Ok(config.server_audio_users.remove(index))
}

pub(super) fn not_found(kind: &'static str, id: &str) -> EditError {
    EditError::NotFound { kind, id: id.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_user() -> Config {
        let mut config = Config::default();
        create_group(&mut config, "Stage Left", None, None).expect("create");
        config.server_audio_users.push(ServerAudioUser {
            name: "FOH".into(),
            group: "stage-left".into(),
            input_channel: Channel::try_from(0u8).expect("a channel"),
            output_channel: Some(Channel::try_from(1u8).expect("a channel")),
            ifb: None,
        });
        config
    }

    #[test]
    fn rename_rewrites_references() {
        let mut config = with_user();
        let group = update_group(&mut config, "stage-left", Some("Scène Côté Jardin"), None, None).expect("rename");
        assert_eq!(group.id(), "scene-cote-jardin");
        assert_eq!(config.server_audio_users[0].group, "scene-cote-jardin");
        config.validate().expect("still valid");
    }

    #[test]
    fn delete_of_referenced_group_names_the_users() {
        let mut config = with_user();
        let err = delete_group(&mut config, "stage-left").expect_err("refused");
        assert!(matches!(&err, EditError::Conflict(m) if m.contains("FOH")), "{err}");
    }

    #[test]
    fn collisions_on_create_and_rename() {
        let mut config = with_user();
        create_group(&mut config, "Other", None, None).expect("create");
        assert!(matches!(create_group(&mut config, "STAGE left", None, None), Err(EditError::Conflict(_))));
        assert!(matches!(
            update_group(&mut config, "other", Some("Stage-Left"), None, None),
            Err(EditError::Conflict(_))
        ));
        // Renaming a group to a name with its own id is no collision.
        update_group(&mut config, "other", Some("OTHER"), None, None).expect("same id");
    }

    fn position(name: &str, listen: &[&str], talk: &[&str]) -> PositionFields {
        let ids = |l: &[&str]| Some(l.iter().map(|s| (*s).to_owned()).collect());
        PositionFields {
            name: Some(name.into()),
            listen: ids(listen),
            talk: ids(talk),
            pin: None,
            site: None,
            announce: None,
            talk_to: None,
            occupants: None,
        }
    }

    #[test]
    fn person_keys_name_positions_and_follow_their_renames_and_deletes() {
        let mut config = Config::default();
        config.groups = vec![Group::new("Stage", None)];
        create_position(&mut config, position("Camera 1", &["stage"], &["stage"])).expect("created");
        let director =
            PositionFields { talk_to: Some(vec!["camera-1".into()]), ..position("Director", &[], &["stage"]) };
        assert_eq!(create_position(&mut config, director).expect("created").talk_to, ["camera-1"]);
        let unknown = PositionFields { talk_to: Some(vec!["nobody".into()]), ..PositionFields::default() };
        let refused = update_position(&mut config, "director", unknown).expect_err("refused");
        assert!(refused.to_string().contains("talkTo[0]: no position has id \"nobody\""), "{refused}");
        let itself = PositionFields { talk_to: Some(vec!["director".into()]), ..PositionFields::default() };
        assert!(update_position(&mut config, "director", itself).is_err(), "a key to itself");

        let renamed = PositionFields { name: Some("Cam A".into()), ..PositionFields::default() };
        update_position(&mut config, "camera-1", renamed).expect("renamed");
        assert_eq!(config.position("director").expect("kept").1.talk_to, ["cam-a"], "follows the rename");
        delete_position(&mut config, "cam-a").expect("deleted");
        assert!(config.position("director").expect("kept").1.talk_to.is_empty(), "goes with the position");
        config.validate().expect("valid");

        let reserved = create_group(&mut config, "Direct Line", None, None).expect_err("reserved");
        assert!(reserved.to_string().contains("kept for direct lines"), "{reserved}");
    }

    #[test]
    fn positions_follow_renames_and_hold_their_groups() {
        let mut config = with_user();
        create_group(&mut config, "FOH", None, None).expect("create");
        create_position(&mut config, position("Stage Manager", &["stage-left", "foh"], &["stage-left"])).expect("ok");
        update_group(&mut config, "foh", Some("Front of House"), None, None).expect("rename");
        assert_eq!(config.positions[0].listen, ["stage-left", "front-of-house"]);
        config.validate().expect("still valid");
        let err = delete_group(&mut config, "front-of-house").expect_err("held by a position");
        assert!(matches!(&err, EditError::Conflict(m) if m.contains("Stage Manager")), "{err}");
        delete_position(&mut config, "stage-manager").expect("delete");
        delete_group(&mut config, "front-of-house").expect("free now");
    }

    #[test]
    fn position_lines_are_checked() {
        let mut config = with_user();
        let ids: Vec<String> = (0..13).map(|i| format!("g{i}")).collect();
        for id in &ids {
            create_group(&mut config, &id.to_uppercase(), None, None).expect("group");
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        for (fields, field) in [
            (position("Empty", &[], &[]), "listen"),
            (position("Ghost", &["nowhere"], &[]), "listen"),
            (position("Twice", &["stage-left"], &["g1", "g1"]), "talk"),
            (position("Thirteen", &ids, &[]), "listen"),
        ] {
            let err = create_position(&mut config, fields).expect_err("refused");
            assert!(matches!(&err, EditError::Invalid { field: f, .. } if *f == field), "{err}");
        }
        create_position(&mut config, position("Talk only", &[], &["stage-left"])).expect("talk-only line");
        create_position(&mut config, position("Twelve", &ids[..12], &ids[..1])).expect("12 lines");
        let err = create_position(&mut config, position("TALK ONLY", &["g1"], &[])).expect_err("collides");
        assert!(matches!(err, EditError::Conflict(_)));
        assert!(config.positions.iter().all(|p| !p.lines().is_empty()));
        config.validate().expect("valid");
    }

    #[test]
    fn empty_slug_is_invalid() {
        let mut config = Config::default();
        let err = create_group(&mut config, "日本", None, None).expect_err("empty id");
        assert!(matches!(err, EditError::Invalid { field: "name", .. }));
    }
}

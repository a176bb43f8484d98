//! [`Config::validate`]: the rules that span several entries of the file.

use std::collections::BTreeMap;

use super::{
    Config, ConfigError, PinHash, TlsMode, check_entity_name, check_group_id_not_direct, check_ifb, check_lines,
    check_stream_tokens, check_talk_to, server::is_private,
};

impl Config {
    /// Checks the rules that span several entries: names and unique ids, references from
    /// server audio users to groups, TLS files given in pairs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut group_ids = BTreeMap::new();
        for (i, group) in self.groups.iter().enumerate() {
            let path = format!("groups[{i}].name");
            let id = check_entity_name(&group.name)
                .and_then(|id| check_group_id_not_direct(&id).map(|()| id))
                .map_err(|m| ConfigError::new(&path, m))?;
            check_stream_tokens(&group.stream_tokens)
                .map_err(|(field, message)| ConfigError::new(format!("groups[{i}].{field}"), message))?;
            if let Some(other) = group_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    path,
                    format!("id {id:?} of {:?} collides with groups[{other}]", group.name),
                ));
            }
        }
        let mut user_ids = BTreeMap::new();
        // An IFB's dip belongs to its output: one IFB per output channel.
        let mut ifb_outputs = BTreeMap::new();
        for (i, user) in self.server_audio_users.iter().enumerate() {
            let path = format!("server_audio_users[{i}]");
            let id = check_entity_name(&user.name).map_err(|m| ConfigError::new(format!("{path}.name"), m))?;
            if let Some(other) = user_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    format!("{path}.name"),
                    format!("id {id:?} of {:?} collides with server_audio_users[{other}]", user.name),
                ));
            }
            if !group_ids.contains_key(&user.group) {
                return Err(ConfigError::new(format!("{path}.group"), format!("no group has id {:?}", user.group)));
            }
            if let Some(ifb) = &user.ifb {
                let at = |key: Option<&str>| format!("{path}.ifb{}", key.map(|k| format!(".{k}")).unwrap_or_default());
                check_ifb(ifb, user.output_channel.is_some(), |g| group_ids.contains_key(g))
                    .map_err(|(key, message)| ConfigError::new(at(key), message))?;
                if let Some(other) = user.output_channel.and_then(|output| ifb_outputs.insert(output, i)) {
                    let message = format!("its output already plays the IFB of server_audio_users[{other}]");
                    return Err(ConfigError::new(at(None), message));
                }
            }
        }
        let mut position_ids = BTreeMap::new();
        for (i, position) in self.positions.iter().enumerate() {
            let path = format!("positions[{i}]");
            let id = check_entity_name(&position.name).map_err(|m| ConfigError::new(format!("{path}.name"), m))?;
            if let Some(other) = position_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    format!("{path}.name"),
                    format!("id {id:?} of {:?} collides with positions[{other}]", position.name),
                ));
            }
            check_lines(&position.listen, &position.talk, |g| group_ids.contains_key(g))
                .map_err(|(field, message)| ConfigError::new(format!("{path}.{field}"), message))?;
        }
        for (i, position) in self.positions.iter().enumerate() {
            check_talk_to(&position.id(), &position.talk_to, |p| position_ids.contains_key(p))
                .map_err(|(field, message)| ConfigError::new(format!("positions[{i}].{field}"), message))?;
        }
        if self.bridge.transport == super::Transport::Rooms {
            let message = "rooms is chosen by media.engine: bridged; write rtp or webrtc (the way to Janus)";
            return Err(ConfigError::new("bridge.transport", message));
        }
        let pins = self.groups.iter().enumerate().map(|(i, g)| (format!("groups[{i}].pin"), &g.pin));
        let pins = pins.chain(self.positions.iter().enumerate().map(|(i, p)| (format!("positions[{i}].pin"), &p.pin)));
        for (path, pin) in pins {
            if pin.as_ref().is_some_and(|p| !p.0.starts_with(PinHash::SCHEME)) {
                return Err(ConfigError::new(path, "not a PIN hash: set PINs through the admin API or UI"));
            }
        }
        if let TlsMode::Files { cert, key } = self.server.tls.mode()
            && (cert.as_os_str().is_empty() || key.as_os_str().is_empty())
        {
            return Err(ConfigError::new("server.tls", "give both `cert` and `key`, or neither"));
        }
        if !is_private(self.server.events_listen.ip()) {
            return Err(ConfigError::new(
                "server.eventsListen",
                "must be a loopback or private address (127.0.0.1, 10.x, 172.16-31.x, 192.168.x, fc00::/7, fe80::/10)",
            ));
        }
        self.janus.validate()?;
        self.network.validate().map_err(|(field, message)| ConfigError::new(format!("network.{field}"), message))?;
        self.audio
            .aes67
            .check()
            .map_err(|(field, message)| ConfigError::new(format!("audio.aes67.{field}"), message))?;
        if !(-60..=0).contains(&self.crew.program_dim_db) {
            return Err(ConfigError::new("crew.programDimDb", "-60 to 0 dB (0: no dimming)"));
        }
        for (i, position) in self.positions.iter().enumerate() {
            self.check_program_talk(&position.talk)
                .and_then(|()| position.check_announce())
                .map_err(|(field, message)| ConfigError::new(format!("positions[{i}].{field}"), message))?;
        }
        for (index, position) in self.positions.iter().enumerate() {
            if let Some(site) = &position.site
                && !self.janus.pool().iter().any(|n| n.site.as_ref() == Some(site))
            {
                return Err(ConfigError::new(
                    format!("positions[{index}].site"),
                    format!("{site:?}: no Janus node has this site"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Channel, Group, ServerAudioUser};

    #[test]
    fn validate_rejects_collisions_and_dangling_refs() {
        let mut config = Config {
            groups: vec![Group::new("Stage Left", None), Group::new("stage  left", None)],
            ..Config::default()
        };
        assert_eq!(config.validate().expect_err("collision").path, "groups[1].name");
        config.groups.pop();
        config.server_audio_users.push(ServerAudioUser {
            name: "FOH".into(),
            group: "nowhere".into(),
            input_channel: Channel(0),
            output_channel: None,
            ifb: None,
        });
        assert_eq!(config.validate().expect_err("dangling").path, "server_audio_users[0].group");
    }

    #[test]
    fn a_program_line_is_listen_only_for_positions_and_its_dim_is_checked() {
        let yaml = "groups:\n  - name: Show\n    program: true\n  - name: Stage\npositions:\n  - name: Desk\n    listen: [show, stage]\n    talk: [stage]\n";
        let config = Config::from_yaml(yaml).expect("parses");
        assert_eq!(config.validate(), Ok(()));
        assert!(config.is_program("show") && !config.is_program("stage"));
        assert_eq!(config.crew.program_dim_db, -14, "the default dim");
        let talks = Config::from_yaml(&yaml.replace("talk: [stage]", "talk: [stage, show]")).expect("parses");
        let err = talks.validate().expect_err("a position talking on a program line");
        assert_eq!(err.path, "positions[0].talk[1]");
        assert!(err.message.contains("program line"), "{}", err.message);
        let loud = Config::from_yaml(&format!("{yaml}crew:\n  programDimDb: 6\n")).expect("parses");
        assert_eq!(loud.validate().expect_err("a dim above 0").path, "crew.programDimDb");
    }

    #[test]
    fn an_ifb_needs_an_output_and_groups_that_exist() {
        let yaml = |ifb: &str, output: &str| {
            format!(
                "groups:\n  - name: Show\n  - name: Director\nserver_audio_users:\n  - name: Presenter\n    group: director\n    input_channel: 0\n{output}    ifb: {ifb}\n"
            )
        };
        let output = "    output_channel: 1\n";
        let cases = [
            (yaml("{program: 2, interrupt: director}", output), None),
            (yaml("{program: show, interrupt: director, dimDb: cut}", output), None),
            (yaml("{program: 2, interrupt: director}", ""), Some("server_audio_users[0].ifb")),
            (yaml("{program: 2, interrupt: nowhere}", output), Some("server_audio_users[0].ifb.interrupt")),
            (yaml("{program: nowhere, interrupt: director}", output), Some("server_audio_users[0].ifb.program")),
            (yaml("{program: director, interrupt: director}", output), Some("server_audio_users[0].ifb.program")),
            // Two IFBs on one output.
            (
                format!(
                    "{}  - name: Guest\n    group: show\n    input_channel: 3\n    output_channel: 1\n    ifb: {{program: 4, interrupt: director}}\n",
                    yaml("{program: 2, interrupt: director}", output)
                ),
                Some("server_audio_users[1].ifb"),
            ),
        ];
        for (text, error) in cases {
            let config = Config::from_yaml(&text).expect("parses");
            assert_eq!(config.validate().err().map(|e| e.path), error.map(str::to_owned), "{text}");
        }
        let config = Config::from_yaml(&yaml("{program: show, interrupt: director}", output)).expect("parses");
        let user = &config.server_audio_users[0];
        assert!(user.uses_group("show") && user.uses_group("director"), "{user:?}");
        assert!(crate::yaml::to_string(&config).is_ok_and(|t| t.contains("ifb:") && t.contains("program: show")));
    }

    #[test]
    fn the_rooms_transport_is_the_media_engine_s_to_choose() {
        let config = |bridge: &str| Config::from_yaml(&format!("bridge:\n  transport: {bridge}\n")).expect("parses");
        let err = config("rooms").validate().expect_err("rooms is control's choice");
        assert!(err.to_string().contains("bridge.transport") && err.to_string().contains("media.engine"), "{err}");
        config("webrtc").validate().expect("webrtc is the config's to choose");
    }

    #[test]
    fn an_announce_key_needs_a_talk_line() {
        let yaml = "groups:\n  - name: Stage\npositions:\n  - name: Desk\n    listen: [stage]\n    announce: true\n";
        let err = Config::from_yaml(yaml).expect("parses").validate().expect_err("nothing to announce on");
        assert_eq!((err.path.as_str(), err.message.contains("talks on no line")), ("positions[0].announce", true));
        let config = Config::from_yaml(&yaml.replace("listen: [stage]", "talk: [stage]")).expect("parses");
        assert_eq!(config.validate(), Ok(()));
        assert!(config.positions[0].announce);
        assert!(crate::yaml::to_string(&config).is_ok_and(|text| text.contains("announce: true")));
    }
}

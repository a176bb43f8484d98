//! Who talks: Janus's voice detection, as a participant's own mute hides it.
//!
//! AudioBridge drops a muted participant's audio before its voice detection (measured on
//! 1.1.2's source: the RTP handler returns early for a muted participant), so its talking state
//! stands still through a mute: a panel that releases its talk key (and mutes itself) mid-word
//! would stay "talking" until it next talks and falls silent, and one that presses again gets
//! no "talking" event, Janus's state being talking already. So a mute is published as the end
//! of a talk, and an unmute as its start again, whenever Janus's state stands at talking.

use super::Users;
use crate::events::LiveEvent;

impl Users {
    /// Janus says `id` started or stopped talking in `room`: published for a user on that line
    /// (a participant partyline did not admit is kicked on its join, not reported here).
    pub fn talking(&self, room: &str, id: &str, talking: bool) {
        let mut users = self.lock();
        let Some(line) =
            users.get_mut(id).and_then(|u| u.lines.iter_mut().find(|l| l.group_id == room && l.joined_at.is_some()))
        else {
            return;
        };
        line.janus_talking = talking;
        line.talking = talking;
        if talking {
            self.heard_on_direct(&mut users, room, id);
        }
        let username = users.get(id).map(|u| u.username.clone()).unwrap_or_default();
        // Under the lock, so that a talk event cannot overtake the join or leave around it.
        self.events.publish(&talk_event(id, username, room, talking));
    }

    /// `id` muted (`muted`) or unmuted itself in `room`: the end or the start of a talk when
    /// Janus's state stands at talking (see the module's comment).
    pub fn muted_self(&self, room: &str, id: &str, muted: bool) {
        let mut users = self.lock();
        let Some(user) = users.get_mut(id) else { return };
        let Some(line) = user.lines.iter_mut().find(|l| l.group_id == room && l.joined_at.is_some() && l.janus_talking)
        else {
            return;
        };
        line.talking = !muted;
        self.events.publish(&talk_event(id, user.username.clone(), room, !muted));
    }
}

fn talk_event(identity: &str, username: String, group_id: &str, talking: bool) -> LiveEvent {
    let (identity, group_id) = (identity.to_owned(), group_id.to_owned());
    if talking {
        LiveEvent::Talking { identity, username, group_id }
    } else {
        LiveEvent::StoppedTalking { identity, username, group_id }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::secrets::SecretValue;
    use crate::users::Line;

    /// Who talks on the stage, as the published events say.
    fn talkers(users: &Users) -> usize {
        users.events.talk(Instant::now()).iter().find(|l| l.line == "stage").map_or(0, |l| l.talkers)
    }

    #[test]
    fn a_mute_ends_a_talk_janus_still_holds_and_the_unmute_takes_it_up_again() {
        let users = Users::default();
        let key = SecretValue::new("k".into());
        users.register("kai-1".into(), "Kai".into(), vec![Line::both("stage")], "t".into(), key, None);
        assert!(users.joined("stage", "kai-1"));
        let published = || users.events.stats().last_id;

        users.muted_self("stage", "kai-1", true);
        users.muted_self("stage", "kai-1", false);
        let quiet = published();
        assert_eq!(quiet, 1, "only the join: a mute or an unmute without a talk is no talk event");

        users.talking("stage", "kai-1", true);
        assert_eq!(talkers(&users), 1);
        users.muted_self("stage", "kai-1", true);
        assert_eq!(talkers(&users), 0, "the key released mid-word: the talk ends");
        users.muted_self("stage", "kai-1", false);
        assert_eq!(talkers(&users), 1, "pressed again: Janus says nothing, its state still talking");
        users.talking("stage", "kai-1", false);
        assert_eq!(talkers(&users), 0);
        users.muted_self("stage", "kai-1", true);
        assert_eq!(published(), quiet + 4, "a mute after Janus's own stop is no event");
        users.muted_self("backstage", "kai-1", true);
        assert_eq!(published(), quiet + 4, "not Kai's line");
    }

    #[test]
    fn the_users_view_says_who_talks_where_as_the_events_last_said() {
        let users = Users::default();
        let key = SecretValue::new("k".into());
        let lines = vec![Line::both("stage"), Line::both("foh")];
        users.register("kai-1".into(), "Kai".into(), lines, "t".into(), key, None);
        assert!(users.joined("stage", "kai-1") && users.joined("foh", "kai-1"));
        let talking = |users: &Users| -> Vec<String> {
            let view = users.get("kai-1").map(|u| u.view()).expect("Kai");
            view.lines.into_iter().filter(|l| l.talking).map(|l| l.group_id).collect()
        };
        assert!(talking(&users).is_empty());
        users.talking("stage", "kai-1", true);
        assert_eq!(talking(&users), ["stage"], "a talk under way, on its line only");
        users.muted_self("stage", "kai-1", true);
        assert!(talking(&users).is_empty(), "the key released mid-word: the talk ended");
        users.muted_self("stage", "kai-1", false);
        assert_eq!(talking(&users), ["stage"], "pressed again");
        users.left("stage", "kai-1", "left");
        assert!(talking(&users).is_empty(), "a leave ends the talk");
        users.talking("foh", "kai-1", true);
        users.talking("foh", "kai-1", false);
        assert!(talking(&users).is_empty());
    }
}

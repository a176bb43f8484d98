//! A panel's key across sessions: a panel that lost its session by leaving its rooms (a
//! network loss, a closed page) takes its panel key and the admin's mutes of its lines into the
//! session it rejoins with, within [`RESUME_GRACE`], showing both its old token and the key.

use std::time::Instant;

use partyline_shared::sync::lock;

use super::{RESUME_GRACE, User, Users};
use crate::secrets::SecretValue;

/// What a panel may take into the session it rejoins with: its panel key and the lines the
/// admin muted.
#[derive(Debug, Clone)]
pub struct Resumed {
    pub panel_key: SecretValue,
    pub muted: Vec<String>,
}

#[derive(Debug)]
pub(super) struct Ended {
    token: SecretValue,
    resumed: Resumed,
    at: Instant,
}

impl Users {
    /// Keeps what a crew member that left may take into the session it rejoins with.
    pub(super) fn keep_for_resume(&self, user: &User) {
        let Some(panel_key) = user.panel_key.clone() else { return };
        let muted = user.lines.iter().filter(|l| l.muted_by_admin).map(|l| l.group_id.clone()).collect();
        let mut ended = lock(&self.ended);
        ended.retain(|e| e.at.elapsed() < RESUME_GRACE);
        ended.push(Ended { token: user.token.clone(), resumed: Resumed { panel_key, muted }, at: Instant::now() });
    }

    /// What the panel that held `token` and `panel_key` takes into its new session: its session
    /// ended by leaving its rooms within [`RESUME_GRACE`], or has not ended yet (its leave not
    /// seen: it loses the key). Both secrets must match: a control surface knows the key, never
    /// the token. `None`: a new key.
    pub fn resume(&self, token: &str, panel_key: &str) -> Option<Resumed> {
        let matches = |t: &SecretValue, k: &SecretValue| t.matches(token) & k.matches(panel_key);
        // The registry first, then the ended sessions, as a leave takes them: the session
        // cannot move from one to the other between the two looks.
        let mut users = self.lock();
        {
            let mut ended = lock(&self.ended);
            ended.retain(|e| e.at.elapsed() < RESUME_GRACE);
            if let Some(index) = ended.iter().position(|e| matches(&e.token, &e.resumed.panel_key)) {
                return Some(ended.remove(index).resumed);
            }
        }
        let user = users.values_mut().find(|u| u.panel_key.as_ref().is_some_and(|k| matches(&u.token, k)))?;
        let panel_key = user.panel_key.take()?;
        let muted = user.lines.iter().filter(|l| l.muted_by_admin).map(|l| l.group_id.clone()).collect();
        users.crew_changed();
        Some(Resumed { panel_key, muted })
    }

    /// Gives back what [`Users::resume`] took for a session that was then refused: the panel
    /// may ask again with the same token and key, within a new [`RESUME_GRACE`].
    pub fn give_back(&self, token: &str, resumed: Resumed) {
        let token = SecretValue::new(token.to_owned());
        lock(&self.ended).push(Ended { token, resumed, at: Instant::now() });
    }

    /// A session the admin ended is not resumed, even when Janus's report of the kick (a leave)
    /// came first.
    pub fn forget_resume(&self, token: &SecretValue) {
        lock(&self.ended).retain(|e| !e.token.matches(token.expose()));
    }
}

//! `crew:` the crew's panels: remote talk, token budgets, program dimming and direct calls.

use serde::{Deserialize, Serialize};

use super::{CallRate, DirectCalls, PendingTokens, RemoteTalkSeconds, TokenRate};

/// `crew:` the crew's panels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct CrewConfig {
    /// A talk key held on through a panel's remote control (`state: on`) is released when the
    /// control surface has sent nothing with the panel's key for this long: a surface that
    /// crashed must not leave a live microphone. A latched talk (`toggle`) stays.
    pub max_remote_talk_seconds: RemoteTalkSeconds,
    /// Tokens one client address may get per minute (`POST /api/token`): a crew behind one NAT
    /// shares an address, so this is sized for a whole crew joining within a minute.
    pub tokens_per_minute: TokenRate,
    /// Tokens issued and not used yet, from everyone together: past this, new ones wait until
    /// some are used or expire (10 minutes after their issue). A rejoining panel (`resume`) is
    /// never refused for it.
    pub max_pending_tokens: PendingTokens,
    /// Tokens issued and not used yet from one client address (an IPv6 /64): one host cannot
    /// hold the whole of `maxPendingTokens` and lock every other join out.
    pub max_pending_per_address: PendingTokens,
    /// How far a panel dims its program lines while someone talks on its other lines or its
    /// user talks: -60 to 0 dB (0: no dimming).
    pub program_dim_db: i32,
    /// Who may open a direct line: `all` (anyone online, from a panel's People list),
    /// `positions` (the person keys of `positions[].talkTo` only), `off`.
    pub direct_calls: DirectCalls,
    /// Direct lines one panel may open a minute (person keys pressed where no line was open):
    /// a callee who declines cannot be rung again and again, nor Janus filled with rooms.
    pub direct_calls_per_minute: CallRate,
}

impl Default for CrewConfig {
    fn default() -> Self {
        Self {
            max_remote_talk_seconds: RemoteTalkSeconds(30),
            tokens_per_minute: TokenRate(120),
            max_pending_tokens: PendingTokens(200),
            // A quarter of the overall cap: a crew behind one NAT joining at once holds a few
            // dozen pending at a time (a join takes about a second); one address cannot hold
            // the whole overall cap.
            max_pending_per_address: PendingTokens(50),
            program_dim_db: -14,
            direct_calls: DirectCalls::default(),
            // Twice the person keys a panel shows at most: a director ringing every position
            // in a busy minute is never refused.
            direct_calls_per_minute: CallRate(20),
        }
    }
}

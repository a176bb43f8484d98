//! The D-Bus object `/org/partyline/Rooms1`, interface `org.partyline.Rooms1` (the contract in
//! `partyline_shared::rooms_bus`): control's way to the rooms' thread, and the task that turns
//! the sessions' comings and goings into signals.

use partyline_rooms::engine::SessionEvent;
use partyline_shared::rooms_bus::{Joined, ROOMS_PATH, RoomLine, RoomsError};
use tokio::sync::mpsc;
use zbus::object_server::SignalEmitter;

use crate::rooms_host::RoomsHost;

/// The served object: the rooms' handle, or none when bridged runs no rooms.
#[derive(Debug)]
pub struct RoomsService {
    host: Option<RoomsHost>,
}

impl RoomsService {
    pub fn new(host: Option<RoomsHost>) -> RoomsService {
        RoomsService { host }
    }

    fn host(&self) -> Result<&RoomsHost, RoomsError> {
        self.host.as_ref().ok_or_else(|| RoomsError::Disabled("bridged runs no rooms (no --rooms-address)".into()))
    }
}

#[zbus::interface(name = "org.partyline.Rooms1")]
impl RoomsService {
    /// Answers a panel's offer: one member per line in its room, with the given rights.
    async fn join(&self, offer: String, lines: Vec<RoomLine>) -> Result<Joined, RoomsError> {
        self.host()?.join(offer, lines).await
    }

    /// A new offer on a running session, with the rights of every m-line in order: the answer.
    async fn renegotiate(&self, session: u64, offer: String, lines: Vec<RoomLine>) -> Result<String, RoomsError> {
        self.host()?.renegotiate(session, offer, lines).await
    }

    /// A talk key of a session's line went on or off.
    async fn set_talking(&self, session: u64, line: u32, talking: bool) -> Result<(), RoomsError> {
        self.host()?.set_talking(session, line, talking).await
    }

    /// Ends a session; false when there was none.
    async fn leave(&self, session: u64) -> Result<bool, RoomsError> {
        self.host()?.leave(session).await
    }

    /// Takes a session's line out of its room (the admin took it away): nothing more is mixed
    /// from it or sent to it; false when there was none.
    async fn drop_line(&self, session: u64, line: u32) -> Result<bool, RoomsError> {
        self.host()?.drop_line(session, line).await
    }

    /// Ends every session but `sessions` (control's own: after its restart, none); returns how
    /// many ended.
    async fn keep_only(&self, sessions: Vec<u64>) -> Result<u32, RoomsError> {
        self.host()?.keep_only(sessions).await
    }

    /// The UDP address the panels reach the rooms at (empty: no rooms).
    #[zbus(property)]
    async fn address(&self) -> String {
        self.host.as_ref().map(|host| host.address().to_string()).unwrap_or_default()
    }

    /// A session's media is up (ICE and DTLS).
    #[zbus(signal)]
    async fn session_connected(emitter: &SignalEmitter<'_>, session: u64) -> zbus::Result<()>;

    /// A session is gone (its panel closed, its network lost, never connected).
    #[zbus(signal)]
    async fn session_ended(emitter: &SignalEmitter<'_>, session: u64) -> zbus::Result<()>;

    /// The rooms receive a session's audio again, or have received none for a second.
    #[zbus(signal)]
    async fn session_receiving(emitter: &SignalEmitter<'_>, session: u64, receiving: bool) -> zbus::Result<()>;
}

/// Emits `SessionConnected`, `SessionEnded` and `SessionReceiving` for the rooms' thread's
/// events, until it stops.
pub async fn notify(connection: zbus::Connection, mut events: mpsc::UnboundedReceiver<SessionEvent>) {
    let emitter = match SignalEmitter::new(&connection, ROOMS_PATH) {
        Ok(emitter) => emitter,
        Err(error) => {
            tracing::error!("D-Bus rooms notifier: {error}");
            return;
        }
    };
    while let Some(event) = events.recv().await {
        let _ = match event {
            SessionEvent::Connected(session) => RoomsService::session_connected(&emitter, session.0).await,
            SessionEvent::Disconnected(session) => RoomsService::session_ended(&emitter, session.0).await,
            SessionEvent::Receiving(session, receiving) => {
                RoomsService::session_receiving(&emitter, session.0, receiving).await
            }
        };
    }
}

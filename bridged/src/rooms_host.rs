//! partyline's own rooms in bridged: the [`Engine`] (WebRTC endpoint and mixer, crate
//! `partyline-rooms`) on a real-time thread of its own, ticking every 20 ms, and the handle the
//! D-Bus service drives it with.
//!
//! The thread owns the engine: nothing else touches it, so it takes no lock. Between two ticks
//! it drains the commands (join, talk keys, leave) that the handle queued and answers each on
//! its own channel; a command waits at most one tick. The sessions' comings and goings go out
//! on an unbounded channel, which the service turns into signals.

use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use partyline_rooms::endpoint::{Endpoint, EndpointConfig, EndpointError, LineRights, SessionId};
use partyline_rooms::engine::{Engine, EngineError, LocalLine, SessionEvent};
use partyline_rooms::mixer::{MixConfig, RoomError};
use partyline_shared::rooms_bus::{Joined, RoomLine, RoomsError};
use tokio::sync::oneshot;

/// The rooms' frame: one mix, one packet per listener, per tick.
const TICK: Duration = Duration::from_millis(20);
/// Commands queued beyond this are refused (the thread is not keeping up): room for a crowd's
/// joins arriving together, which the thread takes between two ticks.
const COMMAND_QUEUE: usize = 1024;
/// The time a tick gives to commands after its mix: a join costs about 2 ms (str0m's session,
/// the answer), and a crowd of 300 taken in one tick made it 100–230 ms late for every
/// listener; within the budget, 300 joining at once are all taken in about 2 s (bench/rooms).
const COMMAND_BUDGET: Duration = Duration::from_millis(5);
/// A thread more than this late starts its ticks again from now instead of catching up in a
/// burst (which would send the listeners several frames at once).
const RESYNC_AFTER: Duration = Duration::from_millis(100);

type Reply<T> = oneshot::Sender<Result<T, RoomsError>>;

/// What the handle asks of the rooms' thread.
enum Command {
    Join { offer: String, lines: Vec<RoomLine>, reply: Reply<Joined> },
    Renegotiate { session: u64, offer: String, lines: Vec<RoomLine>, reply: Reply<String> },
    SetTalking { session: u64, line: u32, talking: bool, reply: Reply<()> },
    Leave { session: u64, reply: Reply<bool> },
    DropLine { session: u64, line: u32, reply: Reply<bool> },
    KeepOnly { sessions: Vec<u64>, reply: Reply<u32> },
    AttachLocal { room: String, line: Arc<dyn LocalLine>, reply: Reply<()> },
    DetachLocal { room: String, reply: Reply<bool> },
}

/// The handle of the running rooms: cheap to clone, used from any task.
#[derive(Debug, Clone)]
pub struct RoomsHost {
    commands: mpsc::SyncSender<Command>,
    address: SocketAddr,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Join { .. } => "Join",
            Command::Renegotiate { .. } => "Renegotiate",
            Command::SetTalking { .. } => "SetTalking",
            Command::Leave { .. } => "Leave",
            Command::DropLine { .. } => "DropLine",
            Command::KeepOnly { .. } => "KeepOnly",
            Command::AttachLocal { .. } => "AttachLocal",
            Command::DetachLocal { .. } => "DetachLocal",
        })
    }
}

impl RoomsHost {
    /// Binds the rooms' UDP socket on `address` and starts their thread.
    pub fn start(
        address: SocketAddr,
        events: tokio::sync::mpsc::UnboundedSender<SessionEvent>,
    ) -> anyhow::Result<RoomsHost> {
        let endpoint = Endpoint::bind(EndpointConfig::new(address))?;
        let address = endpoint.local_addr();
        let engine = Engine::new(endpoint, MixConfig::default());
        let (commands, queue) = mpsc::sync_channel(COMMAND_QUEUE);
        std::thread::Builder::new().name("rooms".into()).spawn(move || run(engine, &queue, &events))?;
        tracing::info!(%address, "partyline's rooms are up");
        Ok(RoomsHost { commands, address })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub async fn join(&self, offer: String, lines: Vec<RoomLine>) -> Result<Joined, RoomsError> {
        self.ask(|reply| Command::Join { offer, lines, reply }).await
    }

    pub async fn renegotiate(&self, session: u64, offer: String, lines: Vec<RoomLine>) -> Result<String, RoomsError> {
        self.ask(|reply| Command::Renegotiate { session, offer, lines, reply }).await
    }

    pub async fn set_talking(&self, session: u64, line: u32, talking: bool) -> Result<(), RoomsError> {
        self.ask(|reply| Command::SetTalking { session, line, talking, reply }).await
    }

    pub async fn leave(&self, session: u64) -> Result<bool, RoomsError> {
        self.ask(|reply| Command::Leave { session, reply }).await
    }

    pub async fn drop_line(&self, session: u64, line: u32) -> Result<bool, RoomsError> {
        self.ask(|reply| Command::DropLine { session, line, reply }).await
    }

    pub async fn keep_only(&self, sessions: Vec<u64>) -> Result<u32, RoomsError> {
        self.ask(|reply| Command::KeepOnly { sessions, reply }).await
    }

    /// Makes `line` (the card's group) the local line of `room`, made if it does not exist.
    pub async fn attach_local(&self, room: &str, line: Arc<dyn LocalLine>) -> Result<(), RoomsError> {
        self.ask(|reply| Command::AttachLocal { room: room.to_owned(), line, reply }).await
    }

    /// Takes `room`'s local line away; false when it had none.
    pub async fn detach_local(&self, room: &str) -> Result<bool, RoomsError> {
        self.ask(|reply| Command::DetachLocal { room: room.to_owned(), reply }).await
    }

    async fn ask<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, RoomsError> {
        let (reply, answer) = oneshot::channel();
        self.commands.try_send(command(reply)).map_err(|error| match error {
            mpsc::TrySendError::Full(_) => RoomsError::Full("the rooms' thread is not keeping up".into()),
            mpsc::TrySendError::Disconnected(_) => stopped(),
        })?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> RoomsError {
    RoomsError::Stopped("the rooms' thread has stopped".into())
}

/// The rooms' thread: a tick every 20 ms, the commands between ticks, until the handle is gone.
fn run(
    mut engine: Engine,
    commands: &mpsc::Receiver<Command>,
    events: &tokio::sync::mpsc::UnboundedSender<SessionEvent>,
) {
    crate::realtime::promote("rooms");
    let mut deadline = Instant::now();
    loop {
        deadline += TICK;
        let now = Instant::now();
        if now > deadline + RESYNC_AFTER {
            tracing::warn!(late_ms = (now - deadline).as_millis(), "the rooms' thread was late: ticking from now");
            deadline = now + TICK;
        }
        match engine.run_tick(deadline) {
            Ok(happened) => {
                for event in happened {
                    // The service's task gone: bridged is stopping.
                    let _ = events.send(event);
                }
            }
            Err(error) => tracing::error!(%error, "the rooms' socket failed"),
        }
        // Commands take at most a share of the tick: a crowd's joins (a session each) wait for
        // the next ticks rather than make this one late for every listener.
        let budget_ends = Instant::now() + COMMAND_BUDGET;
        while Instant::now() < budget_ends {
            match commands.try_recv() {
                Ok(command) => handle(&mut engine, command),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
    }
}

fn handle(engine: &mut Engine, command: Command) {
    let now = Instant::now();
    match command {
        Command::Join { offer, lines, reply } => {
            let joined = engine.join(&offer, &rights(lines), now);
            let _ = reply.send(
                joined.map(|(session, answer)| Joined { session: session.0, answer }).map_err(|error| refusal(&error)),
            );
        }
        Command::Renegotiate { session, offer, lines, reply } => {
            let answer = engine.renegotiate(SessionId(session), &offer, &rights(lines), now);
            let _ = reply.send(answer.map_err(|error| refusal(&error)));
        }
        Command::SetTalking { session, line, talking, reply } => {
            let line = usize::try_from(line).unwrap_or(usize::MAX);
            let _ = reply.send(engine.set_talking(SessionId(session), line, talking).map_err(|error| refusal(&error)));
        }
        Command::Leave { session, reply } => {
            let _ = reply.send(Ok(engine.leave(SessionId(session), now)));
        }
        Command::DropLine { session, line, reply } => {
            let line = usize::try_from(line).unwrap_or(usize::MAX);
            let _ = reply.send(Ok(engine.drop_line(SessionId(session), line)));
        }
        Command::KeepOnly { sessions, reply } => {
            let keep: Vec<SessionId> = sessions.into_iter().map(SessionId).collect();
            let ended = engine.keep_only(&keep, now);
            if ended > 0 {
                tracing::warn!(ended, "sessions control does not know ended in the rooms");
            }
            let _ = reply.send(Ok(u32::try_from(ended).unwrap_or(u32::MAX)));
        }
        Command::AttachLocal { room, line, reply } => {
            let attached = engine.attach_local(&room, line);
            let _ = reply.send(attached.map_err(|error| RoomsError::Stopped(error.to_string())));
        }
        Command::DetachLocal { room, reply } => {
            let _ = reply.send(Ok(engine.detach_local(&room)));
        }
    }
}

/// The engine's rights of each line from the bus's.
fn rights(lines: Vec<RoomLine>) -> Vec<LineRights> {
    lines.into_iter().map(|line| LineRights { line: line.room, talk: line.talk, listen: line.listen }).collect()
}

/// The D-Bus error of an engine's refusal.
fn refusal(error: &EngineError) -> RoomsError {
    let message = error.to_string();
    match error {
        EngineError::Endpoint(EndpointError::Full { .. }) => RoomsError::Full(message),
        EngineError::Endpoint(EndpointError::Offer(_) | EndpointError::Rtc(_)) => RoomsError::BadOffer(message),
        EngineError::UnknownSession(_) => RoomsError::UnknownSession(message),
        EngineError::UnknownLine { .. } | EngineError::Room(RoomError::MayNotTalk(_)) => {
            RoomsError::NotAllowed(message)
        }
        _ => RoomsError::Stopped(message),
    }
}

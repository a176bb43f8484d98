//! The card's participant in one group's Janus AudioBridge room: it sends the group's send and
//! receives the room's mix (the remote crew) through the group's [`Feed`], and the task that
//! joins, watches and rejoins. By job:
//!
//! - `media.rs`: the participant's own GStreamer pipeline (encoder, plain RTP or webrtcbin,
//!   decoder) between the feed and Janus.
//! - `rtp_port.rs`: the loopback socket every plain-RTP participant shares, and the one thread
//!   receiving every room's mix on it.
//! - `negotiation.rs`: WebRTC only: the offer with every local ICE candidate, Janus's answer.
//! - `signalling.rs`: Janus: the session's long poll, the join and its answer, the events that
//!   end a participation.
//! - `local.rs`: on partyline's own rooms (`Transport::Rooms`) instead: the feed is the room's
//!   local line in this process, no Janus, no codec.
//! - this file: the supervisor, one [`Attempt`] after another with the retry policy between them.

mod local;
mod media;
mod negotiation;
mod rtp_port;
mod signalling;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use partyline_shared::backoff::Backoff;
use partyline_shared::bridge::{BranchState, PlanGroup, Transport};
use partyline_shared::janus::SessionEvent;
use partyline_shared::janus::client::{Client, Session};
use partyline_shared::janus::{AudioBridgeRequest, RtpPeer, prebuffer_packets};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::feed::Feed;
use crate::rooms_host::RoomsHost;
use crate::state::{ParticipantStats, StatusBoard};
use crate::tick;

use self::media::{Link, Media};
pub use self::rtp_port::RtpPort;
use self::signalling::{Answer, Events, Offer};

/// The pauses between two attempts.
const RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(5));
/// An attempt that joined and lasted this long was a success: the next pause is the shortest.
const STABLE: Duration = Duration::from_secs(10);
/// Janus drops a session after 60 s without a request.
const KEEPALIVE: Duration = Duration::from_secs(25);
/// How long each step of a join may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long leaving the room (destroying the session) may take.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// What every participant of one plan shares.
#[derive(Debug, Clone)]
pub struct Context {
    /// The card's sampling rate (the feeds' rate).
    pub rate: u32,
    pub board: Arc<StatusBoard>,
    pub janus: Client,
    pub janus_url: String,
    pub transport: Transport,
    pub ice_addresses: Vec<String>,
    pub jitter_buffer_ms: u32,
    /// The loopback port every plain-RTP participant sends from and receives on.
    pub rtp: Arc<RtpPort>,
    /// partyline's own rooms, when bridged hosts them (`--rooms-address`).
    pub rooms: Option<RoomsHost>,
}

/// A running participant; [`Handle::stop`] leaves the room and stops its pipeline.
#[derive(Debug)]
pub struct Handle {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    display: watch::Sender<String>,
}

impl Handle {
    pub fn start(context: Context, group: PlanGroup, feed: Arc<Feed>) -> Handle {
        let cancel = CancellationToken::new();
        let (display, renamed) = watch::channel(group.display.clone());
        let task = match context.transport {
            Transport::Rooms => tokio::spawn(local::stay(context, group, feed, cancel.clone())),
            Transport::Rtp | Transport::Webrtc => {
                tokio::spawn(supervise(context, group, feed, renamed, cancel.clone()))
            }
        };
        Handle { cancel, task, display }
    }

    /// The participant's display name follows its group's users: a new one is sent to Janus
    /// (`configure`) without leaving the room.
    pub fn rename(&self, display: &str) {
        self.display.send_if_modified(|current| {
            let changed = current != display;
            if changed {
                display.clone_into(current);
            }
            changed
        });
    }

    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

/// Attempts to join and stay joined until cancelled, pausing between attempts.
async fn supervise(
    context: Context,
    group: PlanGroup,
    feed: Arc<Feed>,
    mut display: watch::Receiver<String>,
    cancel: CancellationToken,
) {
    let stats = context.board.add_participant(&group.room, &group.display);
    let mut retry = RETRY;
    loop {
        // Each join with the newest name.
        let group = PlanGroup { display: display.borrow_and_update().clone(), ..group.clone() };
        let attempt = Attempt {
            context: &context,
            group: &group,
            display: &mut display,
            feed: &feed,
            stats: &stats,
            stages: Stages::new(&group.room),
            joined: false,
        };
        let (error, joined, lasted) = match attempt.run(&cancel).await {
            Outcome::Stopped => break,
            Outcome::Failed { error, joined, lasted } => (error, joined, lasted),
        };
        let pause = pause_after(&mut retry, joined, lasted);
        tracing::warn!("room {}: {error:#}; retrying in {} ms", group.room, pause.as_millis());
        context.board.participant_state(&group.room, BranchState::Retrying, "", Some(&format!("{error:#}")));
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
    }
    context.board.remove_participant(&group.room);
}

/// The pause after a failed attempt: the policy's next, or its shortest again after an attempt
/// that had joined and held for [`STABLE`] (a failure after a long good run is news, not a
/// streak).
fn pause_after(retry: &mut Backoff, joined: bool, lasted: Duration) -> Duration {
    if joined && lasted > STABLE {
        retry.reset();
    }
    retry.next_pause()
}

/// How an attempt ended.
#[derive(Debug)]
enum Outcome {
    /// Cancelled: the plan no longer has the group, or bridged stops.
    Stopped,
    /// Failed: the participant joins again after a pause. `joined`: Janus had answered the join.
    Failed { error: anyhow::Error, joined: bool, lasted: Duration },
}

/// One join of the room and its watch, from the Janus session to the end of the participation.
#[derive(Debug)]
struct Attempt<'a> {
    context: &'a Context,
    group: &'a PlanGroup,
    /// The display name the participant should have now.
    display: &'a mut watch::Receiver<String>,
    feed: &'a Arc<Feed>,
    stats: &'a Arc<ParticipantStats>,
    stages: Stages,
    /// Whether Janus answered the join (its answer is set in webrtcbin).
    joined: bool,
}

impl Attempt<'_> {
    /// Whatever the attempt built is taken down before it returns: the pipeline is stopped,
    /// the long poll stopped, and the session destroyed (the participant leaves the room).
    async fn run(mut self, cancel: &CancellationToken) -> Outcome {
        self.context.board.participant_state(&self.group.room, BranchState::Connecting, "", None);
        // control registers a participant's token with Janus before bridged hears of it, so a
        // refusal here is a real failure (Janus restarted and not yet told, a revoked token).
        let opened = tokio::select! {
            () = cancel.cancelled() => return Outcome::Stopped,
            opened = self.context.janus.open(&self.context.janus_url, &self.group.token) => opened,
        };
        let session = match opened {
            Ok(session) => session,
            Err(error) => return self.failed(error.into()),
        };
        self.stages.mark("Janus session and handle");
        let ended = tokio::select! {
            () = cancel.cancelled() => None,
            Err(error) = self.in_session(&session) => Some(error),
        };
        // Leave the room: a session destroyed is a participant gone (best effort, bounded).
        let _ = tokio::time::timeout(LEAVE_TIMEOUT, session.destroy()).await;
        match ended {
            None => Outcome::Stopped,
            Some(error) => self.failed(error),
        }
    }

    fn failed(&self, error: anyhow::Error) -> Outcome {
        Outcome::Failed { error, joined: self.joined, lasted: self.stages.started.elapsed() }
    }

    /// Joins and watches the participation until something ends it: returns only its error.
    /// Dropped when the participant is stopped: what it built (the pipeline, the long poll)
    /// goes with it.
    async fn in_session(&mut self, session: &Session) -> anyhow::Result<Infallible> {
        let (group, stages) = (self.group, &self.stages);
        let exists = session.audiobridge(AudioBridgeRequest::Exists { room: group.room.clone() }).await?;
        if !exists.exists {
            return Err(anyhow!("room {:?} does not exist on Janus", group.room));
        }
        stages.mark("room exists");
        let mut events = Events::start(session);
        let (mut media, mut faults) = Media::start(self.context, group, self.feed.clone(), self.stats, stages)?;
        stages.mark("pipeline built and started");
        let latency = self.context.jitter_buffer_ms;
        match media.link() {
            Link::Webrtc { webrtc, events: rtc } => {
                let offer = tokio::time::timeout(STEP_TIMEOUT, negotiation::offer(webrtc, rtc, stages))
                    .await
                    .map_err(|_| anyhow!("webrtcbin made no offer within {STEP_TIMEOUT:?}"))??;
                let prebuffer = prebuffer_packets(latency);
                let answer =
                    signalling::join(session, &mut events, group, prebuffer, Offer::Sdp(offer), stages).await?;
                let Answer::Sdp(answer) = answer else { return Err(anyhow!("Janus answered an offer without SDP")) };
                stages.mark("Janus's answer received");
                negotiation::set_answer(webrtc, &answer).await?;
                stages.mark("answer set as remote description");
            }
            Link::Rtp { port, .. } => {
                let address = port.address();
                let here = RtpPeer {
                    ip: address.ip().to_string(),
                    port: address.port(),
                    payload_type: media::OPUS_PT,
                    audiolevel_ext: None,
                };
                let prebuffer = tick::placed_prebuffer_packets(latency);
                let answer = signalling::join(session, &mut events, group, prebuffer, Offer::Rtp(here), stages).await?;
                let Answer::Rtp(janus) = answer else {
                    return Err(anyhow!("Janus answered a plain-RTP join with SDP"));
                };
                stages.mark("Janus's plain-RTP address received");
                media.send_to(&janus, prebuffer)?;
            }
        }
        self.joined = true;
        self.context.board.participant_state(&group.room, BranchState::Connecting, &group.identity, None);
        self.watch(session, &media, &mut events, &mut faults).await
    }

    /// Until the participation ends: keeps the session alive, waits for the media to come up
    /// (Janus's `webrtcup`, or its first plain-RTP packet), and follows Janus's events and the
    /// pipeline's faults.
    async fn watch(
        &mut self,
        session: &Session,
        media: &Media,
        events: &mut Events,
        faults: &mut mpsc::UnboundedReceiver<String>,
    ) -> anyhow::Result<Infallible> {
        let group = self.group;
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
        let media_deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        let mut media_up = false;
        loop {
            tokio::select! {
                _ = keepalive.tick() => session.keepalive().await?,
                () = tokio::time::sleep_until(media_deadline), if !media_up => {
                    return Err(anyhow!("no media from Janus within {STEP_TIMEOUT:?}"));
                }
                () = media.flowing(), if !media_up => {
                    self.stages.mark("first plain-RTP packet from Janus");
                    media_up = true;
                    self.media_up();
                }
                fault = faults.recv() => return Err(anyhow!("pipeline: {}", fault.unwrap_or_default())),
                Ok(()) = self.display.changed() => {
                    let name = self.display.borrow_and_update().clone();
                    session.send(AudioBridgeRequest::Configure { display: name.clone() }, None).await?;
                    tracing::info!("room {}: now shown as {name:?}", group.room);
                    self.context.board.participant_display(&group.room, &name);
                }
                batch = events.next() => {
                    for event in batch? {
                        match event {
                            SessionEvent::Webrtcup => self.stages.mark("Janus event webrtcup"),
                            SessionEvent::Media { .. } => self.stages.mark("Janus event media"),
                            _ => {}
                        }
                        if event == SessionEvent::Webrtcup && !media_up {
                            media_up = true;
                            self.media_up();
                        }
                        if let Some(ended) = signalling::ending(&event, &group.identity) {
                            return Err(ended.into());
                        }
                    }
                }
            }
        }
    }
}

impl Attempt<'_> {
    fn media_up(&self) {
        let group = self.group;
        let ms = self.stages.started.elapsed().as_millis();
        tracing::info!("joined room {} as {:?} (media up in {ms} ms)", group.room, group.display);
        self.context.board.participant_state(&group.room, BranchState::Joined, &group.identity, Some(""));
    }
}

/// The stages of one join, timed from the start of the attempt: `debug` lines
/// (`RUST_LOG=partyline_bridged=debug`) that show where a join's time goes.
#[derive(Debug, Clone)]
struct Stages {
    room: Arc<str>,
    started: Instant,
}

impl Stages {
    fn new(room: &str) -> Stages {
        Stages { room: room.into(), started: Instant::now() }
    }

    fn mark(&self, stage: &str) {
        tracing::debug!(
            "room {}: join stage at {:.1} ms: {stage}",
            self.room,
            self.started.elapsed().as_secs_f64() * 1000.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_while_attempts_fail_and_starts_over_after_a_join_that_held() {
        let ms = Duration::from_millis;
        let mut retry = RETRY;
        let quick = ms(300);
        // Never joined, or joined but not for long: the pauses grow to the cap.
        let pauses: Vec<Duration> = [false, true, false, true, false, false]
            .iter()
            .map(|&joined| pause_after(&mut retry, joined, quick))
            .collect();
        assert_eq!(pauses, [ms(500), ms(1_000), ms(2_000), ms(4_000), ms(5_000), ms(5_000)]);
        // A long attempt that never joined (a join stuck until its timeouts) is still a failure.
        assert_eq!(pause_after(&mut retry, false, STABLE * 3), ms(5_000));
        // A join that held: the shortest pause again, then growing anew.
        assert_eq!(pause_after(&mut retry, true, STABLE + ms(1)), ms(500));
        assert_eq!(pause_after(&mut retry, false, quick), ms(1_000));
    }
}

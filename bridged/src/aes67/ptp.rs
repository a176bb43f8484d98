//! bridged's PTP follower: GStreamer's PTP clock (`gst-ptp-helper` speaks PTP on the media
//! network's interface; bridged never steers the host's clock), followed in one domain. The AES67
//! pipelines run on a clock that takes its time while its grandmaster is allowed
//! (`media_clock.rs`). Its statistics give the grandmaster, the offset and the path delay; a
//! grandmaster silent for long ([`Learnt::lost_after`]) is a warning and a status change, while
//! the clock runs free at its last rate and the audio goes on; the next sync locks it again. A
//! grandmaster outside `audio.aes67.grandmasters` that wins the domain is not followed (`held`,
//! a warning naming it); a better allowed grandmaster taking over, or one stepping its time, is a
//! step of the directions' clock.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use gst::prelude::*;
use gst_net::PtpClock;
use partyline_shared::aes67::{format_eui64, parse_eui64};
use partyline_shared::bridge::{PtpState, PtpStatus};
use partyline_shared::sync::lock;
use tokio::sync::watch;

use super::media_clock::{Measured, MediaClock};
use crate::state::StatusBoard;

/// A grandmaster silent for this long at least is lost: three announce intervals of AES67's
/// media profile (PTP's own announce receipt timeout). GStreamer's clock takes a sync only when
/// it can follow it with a delay request, which it sends at the grandmaster's minimum
/// delay-request interval after a random wait of up to twice that (IEEE 1588 9.5.11.2), and it
/// drops measurements whose round trip is an outlier: at the usual interval of 1 s its updates
/// come 1 to 3 s apart, more now and then.
const LOST_AFTER_AT_LEAST: Duration = Duration::from_secs(6);
/// …and at least this many times the usual gap between its updates (a grandmaster that asks
/// for delay requests every 8 s updates the clock every 8 to 24 s).
const LOST_AFTER_GAPS: u32 = 4;
/// How many gaps between updates the usual gap is the median of.
const GAPS_KEPT: usize = 9;
/// How often the watchdog looks.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// A mean path delay over this is not a path's (a LAN's is microseconds): GStreamer 1.22 keeps
/// it unsigned, and a delay measured negative wraps to about 2⁶⁴ ns and poisons the mean. That
/// happens with a grandmaster whose rate is far off the machine's (tens to hundreds of ppm) and
/// whose delay requests are far apart (1 s, `ptp4l`'s default): the rate error over the request's
/// random wait outweighs the path's few µs. The mean bounds how far one update may move the
/// clock, so the clock then takes any correction whole.
const PATH_DELAY_LIMIT_NS: i64 = 1_000_000_000;

/// The interface GStreamer's PTP is running on: `gst_ptp_init` takes its interfaces once per
/// process, so a change of interface deinitialises it first.
static INITIALISED: Mutex<Option<String>> = Mutex::new(None);

/// What the statistics callback learnt, read by the watchdog.
#[derive(Debug, Default)]
struct Learnt {
    grandmaster: u64,
    offset_ns: i64,
    path_delay_ns: i64,
    /// GStreamer's mean path delay went past [`PATH_DELAY_LIMIT_NS`] (wrapped) at least once.
    path_delay_wrapped: bool,
    last_sync: Option<Instant>,
    /// The grandmaster's last sync as measured, not looked at yet (none while the path delay
    /// is not a path's).
    measured: Option<Measured>,
    /// The last gaps between two updates of the clock.
    gaps: std::collections::VecDeque<Duration>,
}

impl Learnt {
    fn synced_now(&mut self) {
        let now = Instant::now();
        if let Some(last) = self.last_sync.replace(now) {
            if self.gaps.len() == GAPS_KEPT {
                self.gaps.pop_front();
            }
            self.gaps.push_back(now - last);
        }
    }

    /// How long a silence makes the grandmaster lost.
    fn lost_after(&self) -> Duration {
        let mut gaps: Vec<Duration> = self.gaps.iter().copied().collect();
        gaps.sort_unstable();
        let usual = gaps.get(gaps.len() / 2).copied().unwrap_or_default();
        LOST_AFTER_AT_LEAST.max(usual * LOST_AFTER_GAPS)
    }
}

/// A PTP clock of one domain, followed.
#[derive(Debug)]
pub struct PtpFollower {
    clocks: watch::Receiver<gst::Clock>,
    /// The grandmasters followed (clock identities); empty: any.
    allowed: Arc<Mutex<Vec<u64>>>,
    synced: watch::Receiver<bool>,
    callback: Mutex<Option<gst_net::PtpStatisticsCallback>>,
    watchdog: tokio::task::JoinHandle<()>,
}

impl PtpFollower {
    /// Starts following `domain` on `interface`; reports to `board`. Must run inside the tokio
    /// runtime (the watchdog is a task).
    pub fn start(
        interface: &str,
        domain: u8,
        grandmasters: &[String],
        board: Arc<StatusBoard>,
    ) -> anyhow::Result<PtpFollower> {
        init(interface)?;
        let clock = PtpClock::new(Some("partyline-ptp"), u32::from(domain))
            .with_context(|| format!("no PTP clock for domain {domain}"))?;
        let learnt = Arc::new(Mutex::new(Learnt::default()));
        let callback = {
            let learnt = learnt.clone();
            PtpClock::add_statistics_callback(move |from, stats| {
                if from == domain {
                    learn(&mut lock(&learnt), stats);
                }
                gst::glib::ControlFlow::Continue
            })
        };
        let (synced_tx, synced) = watch::channel(false);
        board.set_ptp(PtpStatus { state: PtpState::Acquiring, domain, ..PtpStatus::default() });
        let media = MediaClock::new();
        let clocks = media.clocks();
        let allowed = Arc::new(Mutex::new(ids(grandmasters)));
        let watched = Watched { clock, media, allowed: allowed.clone(), domain, learnt, board, synced: synced_tx };
        let watchdog = tokio::spawn(watch(watched, interface.to_owned()));
        Ok(PtpFollower { clocks, allowed, synced, callback: Mutex::new(Some(callback)), watchdog })
    }

    /// The clock the AES67 pipelines run on, and each new one after PTP time stepped.
    pub fn clocks(&self) -> watch::Receiver<gst::Clock> {
        self.clocks.clone()
    }

    /// Follows only `grandmasters` from now on (any when empty).
    pub fn set_grandmasters(&self, grandmasters: &[String]) {
        *lock(&self.allowed) = ids(grandmasters);
    }

    /// Waits until the clock has synced to a grandmaster once (it never unsyncs: a lost
    /// grandmaster leaves it running free).
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|s| *s).await;
    }

    pub fn stop(&self) {
        self.watchdog.abort();
        if let Some(callback) = lock(&self.callback).take() {
            callback.remove();
        }
    }
}

impl Drop for PtpFollower {
    fn drop(&mut self) {
        self.stop();
    }
}

fn init(interface: &str) -> anyhow::Result<()> {
    let mut initialised = lock(&INITIALISED);
    if initialised.as_deref() == Some(interface) {
        return Ok(());
    }
    if initialised.take().is_some() {
        PtpClock::deinit();
    }
    PtpClock::init(None, &[interface]).with_context(|| {
        format!("GStreamer's PTP does not start on {interface} (gst-ptp-helper needs CAP_NET_BIND_SERVICE: ports 319 and 320)")
    })?;
    *initialised = Some(interface.to_owned());
    Ok(())
}

/// Clock identities as numbers, as GStreamer's statistics give them.
fn ids(grandmasters: &[String]) -> Vec<u64> {
    grandmasters.iter().filter_map(|id| parse_eui64(id)).map(u64::from_be_bytes).collect()
}

/// Reads one statistics structure of our domain (names from GStreamer's `gstptpclock.c`).
fn learn(learnt: &mut Learnt, stats: &gst::StructureRef) {
    match stats.name().as_str() {
        "GstPtpStatisticsBestMasterClockSelected" => {
            if let Ok(id) = stats.get::<u64>("grandmaster-clock-id") {
                learnt.grandmaster = id;
                learnt.measured = None;
            }
        }
        "GstPtpStatisticsPathDelayMeasured" => {
            if let Ok(Some(delay)) = stats.get::<Option<gst::ClockTime>>("mean-path-delay-avg") {
                let delay = i64::try_from(delay.nseconds()).unwrap_or(i64::MAX);
                if delay > PATH_DELAY_LIMIT_NS {
                    learnt.path_delay_wrapped = true;
                    learnt.path_delay_ns = -1;
                } else {
                    learnt.path_delay_ns = delay;
                }
            }
        }
        "GstPtpStatisticsTimeUpdated" => {
            if let Ok(discontinuity) = stats.get::<i64>("discontinuity") {
                learnt.offset_ns = discontinuity;
            }
            let path_delay = stats.get::<Option<gst::ClockTime>>("mean-path-delay-avg").ok().flatten();
            let times =
                (stats.get::<Option<gst::ClockTime>>("local-time"), stats.get::<Option<gst::ClockTime>>("ptp-time"));
            if let (Some(delay), (Ok(Some(local)), Ok(Some(ptp)))) = (path_delay, times)
                && delay.nseconds() <= PATH_DELAY_LIMIT_NS as u64
            {
                learnt.measured = Some(Measured { local, ptp });
            }
            learnt.synced_now();
        }
        _ => {}
    }
}

/// What the watchdog looks after.
struct Watched {
    clock: PtpClock,
    media: MediaClock,
    allowed: Arc<Mutex<Vec<u64>>>,
    domain: u8,
    learnt: Arc<Mutex<Learnt>>,
    board: Arc<StatusBoard>,
    synced: watch::Sender<bool>,
}

/// Turns what was learnt into the status, logs each change of state, keeps the directions'
/// clock on the allowed grandmaster's time, and says when it first has it.
async fn watch(mut w: Watched, interface: String) {
    let domain = w.domain;
    let mut state = PtpState::Acquiring;
    let mut grandmaster = 0;
    let mut wrap_told = false;
    tracing::info!("PTP: looking for a grandmaster in domain {domain} on {interface}");
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let now = {
            let mut learnt = lock(&w.learnt);
            let lost_after = learnt.lost_after();
            let fresh = learnt.last_sync.is_some_and(|t| t.elapsed() < lost_after);
            let allowed = {
                let list = lock(&w.allowed);
                list.is_empty() || list.contains(&learnt.grandmaster)
            };
            let next = match (w.clock.is_synced(), allowed, fresh) {
                (false, _, _) => PtpState::Acquiring,
                (true, false, _) => PtpState::Held,
                (true, true, true) => PtpState::Locked,
                (true, true, false) => PtpState::Lost,
            };
            let measured = if allowed { learnt.measured.take() } else { None };
            let figures =
                (learnt.grandmaster, learnt.offset_ns, learnt.path_delay_ns, lost_after, learnt.path_delay_wrapped);
            (next, figures, measured)
        };
        let (next, (gm, offset_ns, path_delay_ns, lost_after, wrapped), measured) = now;
        let id = format_eui64(&gm.to_be_bytes());
        if wrapped && !wrap_told {
            tracing::warn!(
                "PTP: GStreamer's follower lost its path delay to grandmaster {id} (a negative measurement \
                 wrapped), so its corrections are unbounded and the clock may step: the grandmaster's clock \
                 is far off this machine's and its delay requests far apart. Set its delay-request interval \
                 to 125 ms (logMinDelayReqInterval -3)"
            );
            wrap_told = true;
        }
        if matches!(next, PtpState::Locked | PtpState::Lost) {
            follow(&mut w.media, &w.clock, measured, &id);
        }
        if next != state || gm != grandmaster {
            tell(next, state, gm != grandmaster, &id, domain, lost_after);
            state = next;
            grandmaster = gm;
            w.synced.send_if_modified(|s| std::mem::replace(s, *s || next == PtpState::Locked) != *s);
        }
        let grandmaster = if gm == 0 { String::new() } else { id };
        w.board.set_ptp(PtpStatus { state, domain, grandmaster, offset_ns, path_delay_ns });
    }
}

/// The directions' clock follows grandmaster `id`: its syncs and GStreamer's domain clock.
fn follow(media: &mut MediaClock, clock: &PtpClock, measured: Option<Measured>, id: &str) {
    let Some(domain_clock) = clock.property::<Option<gst::Clock>>("internal-clock") else { return };
    if let Some(step) = media.follow(&domain_clock, measured) {
        tracing::warn!(
            "PTP: time stepped by {:+.3} ms (grandmaster {id}): the AES67 streams start again at the new time",
            step as f64 / 1e6
        );
    }
}

/// Logs a change of state (or of grandmaster).
fn tell(next: PtpState, was: PtpState, new_grandmaster: bool, id: &str, domain: u8, lost_after: Duration) {
    match next {
        PtpState::Locked if was == PtpState::Lost => {
            tracing::info!("PTP: locked again, to grandmaster {id} (domain {domain})");
        }
        PtpState::Locked if new_grandmaster && was == PtpState::Locked => {
            tracing::warn!("PTP: grandmaster {id} took over (domain {domain})");
        }
        PtpState::Locked => tracing::info!("PTP: locked to grandmaster {id} (domain {domain})"),
        PtpState::Lost => tracing::warn!(
            "PTP: grandmaster {id} lost (no sync for {:.1} s): the clock runs free, audio goes on",
            lost_after.as_secs_f64()
        ),
        PtpState::Held => tracing::warn!(
            "PTP: grandmaster {id} won domain {domain} but is not one of audio.aes67.grandmasters: not \
             followed, the clock holds (runs free at the last allowed grandmaster's rate), audio goes on"
        ),
        PtpState::Acquiring | PtpState::Off => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after_gaps(gaps: &[u64]) -> Duration {
        let learnt = Learnt { gaps: gaps.iter().map(|ms| Duration::from_millis(*ms)).collect(), ..Learnt::default() };
        learnt.lost_after()
    }

    fn path_delay_measured(ns: u64) -> gst::Structure {
        gst::Structure::builder("GstPtpStatisticsPathDelayMeasured")
            .field("domain", 0_u32)
            .field("mean-path-delay-avg", gst::ClockTime::from_nseconds(ns))
            .build()
    }

    #[test]
    fn a_path_delay_that_wrapped_is_told_apart_from_a_path_s() {
        gst::init().expect("GStreamer");
        let mut learnt = Learnt::default();
        learn(&mut learnt, &path_delay_measured(41_500));
        assert_eq!((learnt.path_delay_ns, learnt.path_delay_wrapped), (41_500, false));
        // As bridged read it from GStreamer 1.22 behind a grandmaster 200 ppm off, delay requests
        // every 1 s: a mean poisoned by one measurement of about 2⁶⁴ ns.
        learn(&mut learnt, &path_delay_measured(691_145_664_341_941_960));
        assert_eq!((learnt.path_delay_ns, learnt.path_delay_wrapped), (-1, true));
        learn(&mut learnt, &path_delay_measured(38_000));
        assert_eq!((learnt.path_delay_ns, learnt.path_delay_wrapped), (38_000, true), "told once, kept");
    }

    #[test]
    fn a_grandmaster_is_lost_after_6_s_or_four_usual_gaps_between_updates() {
        assert_eq!(after_gaps(&[]), Duration::from_secs(6), "before any gap");
        // Delay requests every 1 s: updates 1 to 3 s apart, an outlier dropped now and then.
        assert_eq!(after_gaps(&[1200, 2900, 1100, 5800, 2000]), Duration::from_secs(8));
        // A grandmaster asking for delay requests every 8 s.
        assert_eq!(after_gaps(&[9000, 16_000, 12_000]), Duration::from_secs(48));
    }
}

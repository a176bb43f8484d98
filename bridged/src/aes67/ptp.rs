//! bridged's PTP follower: GStreamer's PTP clock (`gst-ptp-helper` speaks PTP on the media
//! network's interface; bridged never steers the host's clock), followed in one domain. The AES67
//! pipelines run on it (`stream.rs`). Its statistics give the grandmaster, the offset and the path
//! delay; a grandmaster silent for long ([`Learnt::lost_after`]) is a warning and a status change, while the clock
//! runs free at its last rate and the audio goes on; the next sync from any grandmaster locks it
//! again (a better grandmaster taking over is the same clock stepping by what they differ).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use gst::prelude::*;
use gst_net::PtpClock;
use partyline_shared::aes67::format_eui64;
use partyline_shared::bridge::{PtpState, PtpStatus};
use partyline_shared::sync::lock;
use tokio::sync::watch;

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

/// The interface GStreamer's PTP is running on: `gst_ptp_init` takes its interfaces once per
/// process, so a change of interface deinitialises it first.
static INITIALISED: Mutex<Option<String>> = Mutex::new(None);

/// What the statistics callback learnt, read by the watchdog.
#[derive(Debug, Default)]
struct Learnt {
    grandmaster: u64,
    offset_ns: i64,
    path_delay_ns: i64,
    last_sync: Option<Instant>,
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
    clock: PtpClock,
    synced: watch::Receiver<bool>,
    callback: Mutex<Option<gst_net::PtpStatisticsCallback>>,
    watchdog: tokio::task::JoinHandle<()>,
}

impl PtpFollower {
    /// Starts following `domain` on `interface`; reports to `board`. Must run inside the tokio
    /// runtime (the watchdog is a task).
    pub fn start(interface: &str, domain: u8, board: Arc<StatusBoard>) -> anyhow::Result<PtpFollower> {
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
        let watchdog = tokio::spawn(watch(clock.clone(), domain, learnt, board, synced_tx, interface.to_owned()));
        Ok(PtpFollower { clock, synced, callback: Mutex::new(Some(callback)), watchdog })
    }

    /// The clock the AES67 pipelines run on.
    pub fn clock(&self) -> gst::Clock {
        self.clock.clone().upcast()
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

/// Reads one statistics structure of our domain (names from GStreamer's `gstptpclock.c`).
fn learn(learnt: &mut Learnt, stats: &gst::StructureRef) {
    match stats.name().as_str() {
        "GstPtpStatisticsBestMasterClockSelected" => {
            if let Ok(id) = stats.get::<u64>("grandmaster-clock-id") {
                learnt.grandmaster = id;
            }
        }
        "GstPtpStatisticsPathDelayMeasured" => {
            if let Ok(Some(delay)) = stats.get::<Option<gst::ClockTime>>("mean-path-delay-avg") {
                learnt.path_delay_ns = i64::try_from(delay.nseconds()).unwrap_or(i64::MAX);
            }
        }
        "GstPtpStatisticsTimeUpdated" => {
            if let Ok(discontinuity) = stats.get::<i64>("discontinuity") {
                learnt.offset_ns = discontinuity;
            }
            learnt.synced_now();
        }
        _ => {}
    }
}

/// Turns what was learnt into the status, logs each change of state, and says when the clock
/// first syncs.
async fn watch(
    clock: PtpClock,
    domain: u8,
    learnt: Arc<Mutex<Learnt>>,
    board: Arc<StatusBoard>,
    synced: watch::Sender<bool>,
    interface: String,
) {
    let mut state = PtpState::Acquiring;
    let mut grandmaster = 0;
    tracing::info!("PTP: looking for a grandmaster in domain {domain} on {interface}");
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let now = {
            let learnt = lock(&learnt);
            let lost_after = learnt.lost_after();
            let fresh = learnt.last_sync.is_some_and(|t| t.elapsed() < lost_after);
            let next = match (clock.is_synced(), fresh) {
                (false, _) => PtpState::Acquiring,
                (true, true) => PtpState::Locked,
                (true, false) => PtpState::Lost,
            };
            (next, learnt.grandmaster, learnt.offset_ns, learnt.path_delay_ns, lost_after)
        };
        let (next, gm, offset_ns, path_delay_ns, lost_after) = now;
        let id = format_eui64(&gm.to_be_bytes());
        if next != state || gm != grandmaster {
            match next {
                PtpState::Locked if state == PtpState::Lost => {
                    tracing::info!("PTP: locked again, to grandmaster {id} (domain {domain})");
                }
                PtpState::Locked if gm != grandmaster && state == PtpState::Locked => {
                    tracing::warn!("PTP: grandmaster {id} took over (domain {domain})");
                }
                PtpState::Locked => tracing::info!("PTP: locked to grandmaster {id} (domain {domain})"),
                PtpState::Lost => tracing::warn!(
                    "PTP: grandmaster {id} lost (no sync for {:.1} s): the clock runs free, audio goes on",
                    lost_after.as_secs_f64()
                ),
                PtpState::Acquiring | PtpState::Off => {}
            }
            state = next;
            grandmaster = gm;
            synced.send_if_modified(|s| std::mem::replace(s, *s || next != PtpState::Acquiring) != *s);
        }
        let grandmaster = if gm == 0 { String::new() } else { id };
        board.set_ptp(PtpStatus { state, domain, grandmaster, offset_ns, path_delay_ns });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after_gaps(gaps: &[u64]) -> Duration {
        let learnt = Learnt { gaps: gaps.iter().map(|ms| Duration::from_millis(*ms)).collect(), ..Learnt::default() };
        learnt.lost_after()
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

//! Real-time scheduling for the card's threads and the two that carry every group's audio to and
//! from Janus. The mix costs about 1 % of a core, but it must run when the card needs it: on a
//! busy machine an ordinary thread is late often enough for the playback queue to run dry (10 ms
//! of silence each time), and a frame encoded late misses the Janus tick it was placed before
//! (Janus then drops one). SCHED_FIFO at a low priority puts the GStreamer capture's and
//! playback's streaming threads (PulseAudio, ALSA), the encoders' thread and the RTP receiving
//! thread ahead of every ordinary thread (builds, control) and behind the sound server's own
//! real-time threads. On PipeWire the card runs in PipeWire's data thread, which PipeWire
//! schedules.

/// The SCHED_FIFO priority asked for: low (1..=99), under PulseAudio's and PipeWire's (20, 88).
pub const PRIORITY: i32 = 10;

/// Puts the calling thread under SCHED_FIFO at [`PRIORITY`], and says whether that worked. It
/// needs root, CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least [`PRIORITY`] (the systemd unit sets
/// `LimitRTPRIO`); without them the thread keeps its ordinary scheduling.
pub fn promote_current_thread() -> Result<(), std::io::Error> {
    let param = libc::sched_param { sched_priority: PRIORITY };
    // SAFETY: sched_setscheduler reads the one sched_param we pass by reference, which lives
    // through the call; pid 0 is the calling thread. It has no other effect on memory.
    #[allow(unsafe_code)]
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) };
    if result == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// [`promote_current_thread`] for the streaming thread named `thread`, logged either way.
pub fn promote(thread: &str) {
    match promote_current_thread() {
        Ok(()) => tracing::info!("{thread}: real-time scheduling (SCHED_FIFO {PRIORITY})"),
        Err(error) => tracing::warn!(
            "{thread}: no real-time scheduling ({error}); the card's audio may drop out on a busy machine \
             (run as root, or grant RLIMIT_RTPRIO {PRIORITY}: the systemd unit's LimitRTPRIO)"
        ),
    }
}

/// [`promote`] from within a callback of GStreamer's: its streaming thread is made by the element
/// and known only from the callback's first call. The first call promotes, the rest are free.
pub struct PromoteOnce {
    thread: &'static str,
    done: bool,
}

impl PromoteOnce {
    pub fn new(thread: &'static str) -> PromoteOnce {
        PromoteOnce { thread, done: false }
    }

    pub fn here(&mut self) {
        if !self.done {
            promote(self.thread);
            self.done = true;
        }
    }
}

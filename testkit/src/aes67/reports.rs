//! What a console reports ([`Levels`], [`Lateness`], [`Spread`], [`Sap`]), read from its
//! JSON events.

use serde_json::Value;

/// A `levels` report of what a console received over one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels {
    /// Frames received in the window (48 a millisecond when nothing is lost).
    pub frames: u64,
    /// Each channel's RMS level (dBFS, −100 for silence or nothing), from channel 1.
    pub dbfs: Vec<f64>,
    /// Each channel's level of the console's tone frequency alone (as [`crate::audio::tone_db`]).
    pub tone_dbfs: Vec<f64>,
}

impl Levels {
    /// The tone's level on `channel` (from 1).
    pub fn tone(&self, channel: usize) -> f64 {
        self.tone_dbfs[channel - 1]
    }

    /// The RMS level of `channel` (from 1).
    pub fn rms(&self, channel: usize) -> f64 {
        self.dbfs[channel - 1]
    }
}

/// A `lateness` report: how late the received stream's packets arrived over one window, their
/// arrival minus their RTP time.
#[derive(Debug, Clone, PartialEq)]
pub struct Lateness {
    pub packets: u64,
    /// Packets missing from the sequence.
    pub lost: u64,
    /// Arrival on the console's PTP clock (a follower's estimate of the grandmaster's time, as
    /// partyline's is); None without packets.
    pub ptp: Option<Spread>,
    /// Arrival on the host's `CLOCK_REALTIME`, which is the grandmasters' time here within
    /// microseconds: the sender's timing as it is, the console's clock error aside.
    pub host: Option<Spread>,
    /// The console's PTP time minus the host's `CLOCK_REALTIME` at the report (µs).
    pub clock_offset_us: f64,
}

/// The least, median, 99th percentile and greatest of a window's values (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// A SAP packet a console heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Sap {
    pub deletion: bool,
    /// The announcer's address (SAP's origin field).
    pub origin: String,
    /// The message id hash.
    pub hash: u16,
    /// The SDP's session name (`s=`), if it has one.
    pub name: Option<String>,
    pub sdp: String,
    /// Why partyline's own SDP check refuses this SDP, if it does.
    pub sdp_error: Option<String>,
}

pub(super) fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn numbers(value: &Value) -> Vec<f64> {
    value.as_array().map(|a| a.iter().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect()).unwrap_or_default()
}

pub(super) fn levels(event: &Value) -> Option<Levels> {
    (event["event"] == "levels").then(|| Levels {
        frames: event["frames"].as_u64().unwrap_or(0),
        dbfs: numbers(&event["dbfs"]),
        tone_dbfs: numbers(&event["tone_dbfs"]),
    })
}

pub(super) fn lateness(event: &Value) -> Option<Lateness> {
    (event["event"] == "lateness").then(|| Lateness {
        packets: event["packets"].as_u64().unwrap_or(0),
        lost: event["lost"].as_u64().unwrap_or(0),
        ptp: spread(event),
        host: spread(&event["host"]),
        clock_offset_us: event["clock_offset_us"].as_f64().unwrap_or(f64::NAN),
    })
}

fn spread(value: &Value) -> Option<Spread> {
    Some(Spread {
        min_us: value["min_us"].as_f64()?,
        p50_us: value["p50_us"].as_f64()?,
        p99_us: value["p99_us"].as_f64()?,
        max_us: value["max_us"].as_f64()?,
    })
}

pub(super) fn sap(event: &Value) -> Option<Sap> {
    (event["event"] == "sap").then(|| Sap {
        deletion: event["deletion"].as_bool().unwrap_or(false),
        origin: text(&event["origin"]),
        hash: event["hash"].as_u64().and_then(|h| u16::try_from(h).ok()).unwrap_or(0),
        name: event["name"].as_str().map(str::to_owned),
        sdp: text(&event["sdp"]),
        sdp_error: event["sdp_error"].as_str().map(str::to_owned),
    })
}

//! The received stream: its pipeline ([`Receiver`]), the kernel-stamped timing of its packets'
//! arrival, their depayloading, and the onsets heard in it, gathered into a report [`Window`].

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use partyline_shared::aes67::{Aes67Stream, Encoding, RATE};
use serde_json::json;

use super::{Args, NS_PER_S, element, emit, eui64, play_on, report_errors, sample_bytes};

/// What a report window gathered of the received stream.
pub(crate) struct Window {
    pub(crate) channels: usize,
    /// Each channel's samples, in arrival order.
    pub(crate) samples: Vec<Vec<f32>>,
    /// Each packet's arrival on the PTP clock minus its RTP time, in ns.
    pub(crate) lateness: Vec<i64>,
    /// The same on the host's `CLOCK_REALTIME`, the grandmasters' time.
    pub(crate) host_lateness: Vec<i64>,
    pub(crate) lost: u64,
    pub(crate) last_seq: Option<u16>,
}

impl Window {
    pub(crate) fn new(channels: usize) -> Window {
        Window {
            channels,
            samples: vec![Vec::new(); channels],
            lateness: Vec::new(),
            host_lateness: Vec::new(),
            lost: 0,
            last_seq: None,
        }
    }
}

/// The receive pipeline: `udpsrc` (its packets' arrival timed by a probe) → `rtpjitterbuffer`
/// placing them in time by RFC 7273 (PTP) → `appsink`, depayloaded here.
pub(crate) struct Receiver {
    pipeline: gst::Pipeline,
    pub(crate) stream: Aes67Stream,
    /// The SAP origin and hash of the announcement it came from.
    pub(crate) announced_by: Option<(Ipv4Addr, u16)>,
    /// Where it gathers; emptied when it stops, which ends the reports.
    window: Arc<Mutex<Option<Window>>>,
    /// Ends its timing of arrivals.
    stopped: Arc<AtomicBool>,
}

impl Receiver {
    pub(crate) fn start(
        args: &Args,
        clock: &gst::Clock,
        stream: Aes67Stream,
        announced_by: Option<(Ipv4Addr, u16)>,
        window: &Arc<Mutex<Option<Window>>>,
    ) -> Result<Receiver, String> {
        let grandmaster = stream.grandmaster.clone().unwrap_or_else(|| eui64(0));
        let caps = gst::Caps::builder("application/x-rtp")
            .field("media", "audio")
            .field("clock-rate", RATE as i32)
            .field("encoding-name", stream.encoding.name())
            .field("encoding-params", stream.channels.to_string())
            .field("channels", i32::from(stream.channels))
            .field("payload", i32::from(stream.payload_type))
            .field("a-ts-refclk", format!("ptp=IEEE1588-2008:{grandmaster}:{}", stream.ptp_domain))
            .field("a-mediaclk", format!("direct={}", stream.media_clock_offset))
            .build();
        let source = element("udpsrc")?;
        source.set_property("address", stream.group.to_string());
        source.set_property("port", i32::from(stream.port));
        source.set_property("multicast-iface", args.iface.as_str());
        source.set_property("caps", &caps);
        let jitter = element("rtpjitterbuffer")?;
        jitter.set_property_from_str("mode", "synced");
        jitter.set_property("rfc7273-sync", true);
        jitter.set_property("latency", 5u32);
        let channels = usize::from(stream.channels);
        let (encoding, payload_type) = (stream.encoding, stream.payload_type);
        let into = Arc::clone(window);
        let mut onsets = Onsets { quiet: vec![0; channels], clock: clock.clone(), offset: stream.media_clock_offset };
        let sink = gst_app::AppSink::builder()
            .sync(false)
            .callbacks(
                gst_app::AppSinkCallbacks::builder()
                    .new_sample(move |sink| {
                        let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                        if let Some(buffer) = sample.buffer()
                            && let Ok(map) = buffer.map_readable()
                            && let Some(payload) = rtp_payload(&map, payload_type)
                        {
                            let mut window = into.lock().unwrap_or_else(PoisonError::into_inner);
                            if let Some(window) = window.as_mut() {
                                let from = window.samples.first().map_or(0, Vec::len);
                                depayload(payload, encoding, channels, &mut window.samples);
                                let rtp_time = u32::from_be_bytes([map[4], map[5], map[6], map[7]]);
                                onsets.look(&window.samples, from, rtp_time);
                            }
                        }
                        Ok(gst::FlowSuccess::Ok)
                    })
                    .build(),
            )
            .build();
        let pipeline = gst::Pipeline::with_name("receive");
        pipeline.add_many([&source, &jitter, sink.upcast_ref()]).map_err(|e| format!("receive pipeline: {e}"))?;
        gst::Element::link_many([&source, &jitter, sink.upcast_ref()]).map_err(|e| format!("receive pipeline: {e}"))?;
        report_errors(&pipeline, "receive");

        let stopped = Arc::new(AtomicBool::new(false));
        time_arrivals(args, &stream, clock, window, &stopped)?;
        *window.lock().unwrap_or_else(PoisonError::into_inner) = Some(Window::new(channels));
        play_on(&pipeline, clock)?;
        emit(&json!({
            "event": "receiving",
            "name": stream.name,
            "origin": stream.origin,
            "group": stream.group,
            "port": stream.port,
            "encoding": stream.encoding.name(),
            "channels": stream.channels,
            "payload_type": stream.payload_type,
            "ptp_domain": stream.ptp_domain,
            "grandmaster": stream.grandmaster,
            "media_clock_offset": stream.media_clock_offset,
        }));
        Ok(Receiver { pipeline, stream, announced_by, window: Arc::clone(window), stopped })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        self.stopped.store(true, Ordering::SeqCst);
        *self.window.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Times the stream's packets as they reach this host: a socket of its own on the stream's group
/// and port, where the kernel stamps each packet's arrival (`SO_TIMESTAMPNS`, on
/// `CLOCK_REALTIME`), so that how late this process's threads run does not count. The arrival on
/// the PTP clock is that stamp plus the clock's offset from `CLOCK_REALTIME` when it is read.
fn time_arrivals(
    args: &Args,
    stream: &Aes67Stream,
    clock: &gst::Clock,
    window: &Arc<Mutex<Option<Window>>>,
    stopped: &Arc<AtomicBool>,
) -> Result<(), String> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
    use socket2::{Domain, Protocol, Socket, Type};
    let fail = |e: std::io::Error| format!("timing socket: {e}");
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    // Beside udpsrc's socket on the same group and port: each gets every packet.
    socket.set_reuse_address(true).map_err(fail)?;
    socket.bind(&SocketAddrV4::new(stream.group, stream.port).into()).map_err(fail)?;
    socket.join_multicast_v4(&stream.group, &args.address).map_err(fail)?;
    socket.set_read_timeout(Some(Duration::from_millis(200))).map_err(fail)?;
    setsockopt(&socket, sockopt::ReceiveTimestampns, &true).map_err(|e| format!("SO_TIMESTAMPNS: {e}"))?;
    let socket: UdpSocket = socket.into();
    let (clock, window, stopped) = (clock.clone(), Arc::clone(window), Arc::clone(stopped));
    let (payload_type, offset) = (stream.payload_type, stream.media_clock_offset);
    std::thread::spawn(move || {
        let mut packet = vec![0u8; 2048];
        let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
        while !stopped.load(Ordering::SeqCst) {
            let mut buffers = [std::io::IoSliceMut::new(&mut packet)];
            let (size, stamp) =
                match recvmsg::<()>(socket.as_raw_fd(), &mut buffers, Some(&mut control), MsgFlags::empty()) {
                    Ok(message) => {
                        let stamp = message.cmsgs().ok().and_then(|mut all| {
                            all.find_map(|c| match c {
                                ControlMessageOwned::ScmTimestampns(t) => {
                                    Some(t.tv_sec() as u64 * NS_PER_S + t.tv_nsec() as u64)
                                }
                                _ => None,
                            })
                        });
                        (message.bytes, stamp)
                    }
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
                    Err(error) => {
                        eprintln!("aes67-console: timing socket: {error}");
                        return;
                    }
                };
            let (ptp_now, host_now) = (clock.time().nseconds(), realtime_ns());
            let arrival = stamp.unwrap_or(host_now);
            let data = &packet[..size];
            if size < 12 || data[1] & 0x7f != payload_type {
                continue;
            }
            let seq = u16::from_be_bytes([data[2], data[3]]);
            let rtp_time = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
            let on_ptp = arrival.wrapping_add(ptp_now.wrapping_sub(host_now));
            let mut window = window.lock().unwrap_or_else(PoisonError::into_inner);
            // Checked under the lock: a stopped receiver's last packet is not its successor's.
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            if let Some(window) = window.as_mut() {
                window.lateness.push(lateness_ns(on_ptp, rtp_time, offset));
                window.host_lateness.push(lateness_ns(arrival, rtp_time, offset));
                if let Some(last) = window.last_seq {
                    let gap = seq.wrapping_sub(last);
                    if (2..1000).contains(&gap) {
                        window.lost += u64::from(gap - 1);
                    }
                }
                window.last_seq = Some(seq);
            }
        }
    });
    Ok(())
}

/// The payload of an RTP packet of `payload_type` (after CSRCs and a header extension, before
/// padding), or None.
fn rtp_payload(packet: &[u8], payload_type: u8) -> Option<&[u8]> {
    let (&first, &second) = (packet.first()?, packet.get(1)?);
    if first >> 6 != 2 || second & 0x7f != payload_type {
        return None;
    }
    let mut start = 12 + 4 * usize::from(first & 0x0f);
    if first & 0x10 != 0 {
        let words = packet.get(start + 2..start + 4)?;
        start += 4 + 4 * usize::from(u16::from_be_bytes([words[0], words[1]]));
    }
    let padding = if first & 0x20 != 0 { usize::from(*packet.last()?) } else { 0 };
    packet.get(start..packet.len().checked_sub(padding)?)
}

/// Appends the frames of an L16 or L24 payload (big-endian, interleaved) to each channel.
fn depayload(payload: &[u8], encoding: Encoding, channels: usize, into: &mut [Vec<f32>]) {
    let width = sample_bytes(encoding);
    for frame in payload.chunks_exact(width * channels) {
        for (channel, sample) in into.iter_mut().zip(frame.chunks_exact(width)) {
            let value = match encoding {
                Encoding::L24 => f64::from(i32::from_be_bytes([sample[0], sample[1], sample[2], 0]) >> 8) / 8_388_608.0,
                Encoding::L16 => f64::from(i16::from_be_bytes([sample[0], sample[1]])) / 32_768.0,
            };
            channel.push(value as f32);
        }
    }
}

/// The onsets of the received channels, each reported with its latency from the burst that made
/// it: with `--bursts`, a console's and every burst it hears start on a whole 500 ms of PTP time
/// (the send's RTP time is PTP time × 48000), so an onset's PTP time past the last such moment is
/// how long the burst took to come back (less than 500 ms); its PTP time itself goes with it, for
/// bursts from elsewhere. An onset: the first sample over
/// −30 dBFS after 50 ms under it.
struct Onsets {
    /// Samples under the threshold so far, per channel.
    quiet: Vec<u32>,
    clock: gst::Clock,
    offset: u32,
}

impl Onsets {
    const LOUD: f32 = 0.0316;
    const QUIET: u32 = RATE / 20;

    /// Looks at the samples of one packet (from `from` on in each channel), its RTP time `rtp_time`.
    fn look(&mut self, samples: &[Vec<f32>], from: usize, rtp_time: u32) {
        for (channel, (quiet, values)) in self.quiet.iter_mut().zip(samples).enumerate() {
            for (i, value) in values.iter().skip(from).enumerate() {
                if value.abs() <= Self::LOUD {
                    *quiet = quiet.saturating_add(1);
                    continue;
                }
                if *quiet >= Self::QUIET {
                    let now = self.clock.time().nseconds();
                    let at = now as i64 - lateness_ns(now, rtp_time.wrapping_add(i as u32), self.offset);
                    let latency_ms = at.rem_euclid(500_000_000) as f64 / 1e6;
                    emit(&json!({"event": "onset", "channel": channel + 1, "latency_ms": latency_ms, "ptp_ns": at}));
                }
                *quiet = 0;
            }
        }
    }
}

/// How late a packet of RTP time `rtp_time` arrives at PTP time `now` (ns), its RTP time being
/// PTP time × 48000 + `offset` modulo 2³²: the packet's PTP time is the one of that RTP time
/// nearest to now.
fn lateness_ns(now: u64, rtp_time: u32, offset: u32) -> i64 {
    let now_frames = (u128::from(now) * u128::from(RATE) / u128::from(NS_PER_S)) as i64;
    let behind = (now_frames as u32).wrapping_sub(rtp_time.wrapping_sub(offset)) as i32;
    let frame = now_frames - i64::from(behind);
    now as i64 - (i128::from(frame) * i128::from(NS_PER_S) / i128::from(RATE)) as i64
}

/// The host's `CLOCK_REALTIME` in ns since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_reads_the_rtp_time_nearest_to_now() {
        // 1.7e9 s of PTP time: RTP time has wrapped around many times.
        let sent: u64 = 1_700_000_000_123_000_000;
        let rtp = |ns: u64| (u128::from(ns) * 48_000 / 1_000_000_000) as u32;
        assert_eq!(lateness_ns(sent + 1_100_000, rtp(sent), 0), 1_100_000);
        assert_eq!(lateness_ns(sent + 250_000, rtp(sent).wrapping_add(7), 7), 250_000);
        // An early packet (a sender ahead of the receiver's clock).
        assert_eq!(lateness_ns(sent - 500_000, rtp(sent), 0), -500_000);
    }

    #[test]
    fn payloads_are_found_after_csrcs_and_extensions_and_before_padding() {
        let mut packet = vec![0x80 | 0x20 | 0x10 | 1, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        packet.extend([0; 4]); // one CSRC
        packet.extend([0xbe, 0xde, 0, 1, 0, 0, 0, 0]); // an extension of one word
        packet.extend([1, 2, 3, 4, 5, 6]);
        packet.extend([0, 2]); // two bytes of padding
        assert_eq!(rtp_payload(&packet, 96), Some(&[1, 2, 3, 4, 5, 6][..]));
        assert_eq!(rtp_payload(&packet, 97), None);
    }

    #[test]
    fn l24_and_l16_samples_are_read_big_endian_and_signed() {
        let mut channels = vec![Vec::new(); 2];
        depayload(&[0x40, 0, 0, 0xc0, 0, 0], Encoding::L24, 2, &mut channels);
        depayload(&[0x40, 0, 0xc0, 0], Encoding::L16, 2, &mut channels);
        assert_eq!(channels, [[0.5, 0.5], [-0.5, -0.5]]);
    }
}

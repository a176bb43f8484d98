//! Pads of bridged's own at the two ends of a participant's codec chains. bridged's threads push
//! into a chain's first element through a [`Injector`] and take what its last element gives
//! through a [`sink`] pad, so the elements run in the thread that pushes and a participant's
//! pipeline has no streaming thread of its own (GStreamer's own element tests drive elements
//! the same way). One thread then serves every group: `encoders.rs` for the sends,
//! `rtp_port.rs` for what Janus sends back.

use anyhow::Context as _;
use gst::prelude::*;

/// A source pad linked to a chain's first element: what is pushed into it runs through the
/// chain in the pushing thread.
#[derive(Debug)]
pub struct Injector {
    pad: gst::Pad,
}

impl Injector {
    /// Links a new pad to `into` and announces a stream of `caps` (a time segment from 0).
    /// `into`'s element must be running (PAUSED or PLAYING) for the announcement to land.
    pub fn new(name: &str, caps: &gst::Caps, into: &gst::Pad) -> anyhow::Result<Injector> {
        let pad = gst::Pad::builder(gst::PadDirection::Src).name(name).build();
        pad.set_active(true).context("a pad of bridged's own does not activate")?;
        pad.link(into).with_context(|| format!("{name} does not link to {}", into.name()))?;
        let segment = gst::FormattedSegment::<gst::ClockTime>::new();
        let announced = pad.push_event(gst::event::StreamStart::new(name))
            && pad.push_event(gst::event::Caps::new(caps))
            && pad.push_event(gst::event::Segment::new(&segment));
        anyhow::ensure!(announced, "{} refused the stream of {name} ({caps})", into.name());
        Ok(Injector { pad })
    }

    /// Runs `buffer` through the chain. An error is the chain's: a stopping participant
    /// (flushing), or an element's fault, which its pipeline's bus reports.
    pub fn push(&self, buffer: gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
        self.pad.push(buffer)
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        let _ = self.pad.set_active(false);
    }
}

/// A sink pad linked after `from`, accepting `caps` and handing each buffer to `take` in the
/// thread that pushed it. `take` must not block: it runs in a thread that serves every group.
/// The caller keeps the pad: a link does not hold its peer, and a dropped pad unlinks.
pub fn sink<F>(name: &str, caps: gst::Caps, from: &gst::Pad, take: F) -> anyhow::Result<gst::Pad>
where
    F: Fn(&gst::BufferRef) + Send + Sync + 'static,
{
    let pad = gst::Pad::builder(gst::PadDirection::Sink)
        .name(name)
        .chain_function(move |_, _, buffer| {
            take(&buffer);
            Ok(gst::FlowSuccess::Ok)
        })
        .query_function(move |pad, parent, query| match query.view_mut() {
            // No element behind the pad to answer for it: the caps it takes are `caps`.
            gst::QueryViewMut::Caps(query) => {
                let result = match query.filter() {
                    Some(filter) => filter.intersect_with_mode(&caps, gst::CapsIntersectMode::First),
                    None => caps.clone(),
                };
                query.set_result(&result);
                true
            }
            gst::QueryViewMut::AcceptCaps(query) => {
                let accepted = query.caps().can_intersect(&caps);
                query.set_result(accepted);
                true
            }
            _ => gst::Pad::query_default(pad, parent, query),
        })
        .build();
    pad.set_active(true).context("a pad of bridged's own does not activate")?;
    from.link(&pad).with_context(|| format!("{} does not link to {name}", from.name()))?;
    Ok(pad)
}

//! The card on PipeWire: one node of bridged's own, a `pw_filter` ([`filter`]) with a DSP port
//! per card channel and direction, run once per graph cycle in PipeWire's data thread. Each cycle
//! it takes the capture's block from its input ports, mixes it ([`Mixing`]: the outputs into the
//! playback queue, the sends to the participants), and fills its output ports from that queue
//! ([`Jitter`], which trims whatever level a start left): a block is played in the very cycle it
//! was captured in, always (measured on the test card: 0 ms between the card's input and output
//! ports). Each direction is here only when its device is a PipeWire node (`card.rs`); the other
//! goes through GStreamer (`pipeline.rs`).
//!
//! One node rather than a capture stream and a playback stream (`pw_stream`): a stream is a
//! node of its own with a format converter in front of it, so two streams meant two nodes and
//! two converters every cycle, and which of the two ran first was PipeWire's choice (a played
//! block now and then a cycle late). The CPU is about the same either way (BENCHMARKS.md,
//! "Matrix": the data thread wakes once per cycle for both), the memory 3 MiB less, the order
//! fixed. DSP ports need no converter: the device's own
//! adapter hands over each channel as F32 at the graph's rate. As the session manager links
//! streams but not filters, bridged links its ports itself ([`wiring`]), and relinks them when a
//! device node comes back.
//!
//! Not GStreamer's `pipewiresrc`/`pipewiresink`: pipewiresink (0.3.65) hands every buffer it
//! gets to its stream and gives the stream at least 8 buffers, and nothing trims that stream's
//! queue (pulled, it kept all 8 full: card → card 54 ms; fed a block per capture, it kept
//! whatever backlog the start left: 6 to 22 ms from one start to the next); pipewiresrc hands
//! each block over through two threads of its own, which made whether a block reached the
//! playback in its cycle or the next a race.
//!
//! The node lives on a thread of its own running PipeWire's main loop; stopped when dropped.

mod filter;
mod wiring;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use pipewire as pw;
use pw::spa::utils::Direction;

use crate::card::Endpoint;
use crate::mix::{CHANNELS, Jitter};
use crate::pipeline::{Mixing, lock};
use crate::realtime;
use crate::state::Shared;
use filter::{Cycle, Port, State};
use wiring::{Graph, POSITIONS, PortInfo, Target, Wanted};

/// How long the node may take to connect and be linked to the card's nodes.
const START_TIMEOUT: Duration = Duration::from_secs(3);

/// The capture: its node, and the mix each block goes through.
pub struct Capture {
    pub endpoint: Endpoint,
    pub mixing: Mixing,
}

/// The playback: its node, and the queue it takes its blocks from.
pub struct Playback {
    pub endpoint: Endpoint,
    pub queue: Arc<Mutex<Jitter>>,
}

/// The running node.
pub struct PipeWireCard {
    quit: pw::channel::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for PipeWireCard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeWireCard").field("running", &self.thread.is_some()).finish_non_exhaustive()
    }
}

/// What the node's thread needs to open it.
struct Opening {
    rate: u32,
    /// `node.latency`: the card's period, in frames.
    period: u32,
    capture: Option<Capture>,
    playback: Option<Playback>,
    shared: Arc<Shared>,
}

impl PipeWireCard {
    /// Opens the directions given at `rate`, asking for blocks of `period` frames, and returns
    /// once the node is connected and linked to the card's nodes (or failed to be).
    pub fn start(
        rate: u32,
        period: u32,
        capture: Option<Capture>,
        playback: Option<Playback>,
        shared: Arc<Shared>,
    ) -> anyhow::Result<PipeWireCard> {
        let what = [capture.as_ref().map(|c| &c.endpoint), playback.as_ref().map(|p| &p.endpoint)]
            .into_iter()
            .flatten()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" and ");
        let opening = Opening { rate, period, capture, playback, shared };
        let (quit, quit_rx) = pw::channel::channel();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pw-card".into())
            .spawn(move || {
                if let Err(error) = run(opening, quit_rx, &ready) {
                    let _ = ready.send(Err(error));
                }
            })
            .context("no thread for the PipeWire node")?;
        let card = PipeWireCard { quit, thread: Some(thread) };
        match started.recv_timeout(START_TIMEOUT) {
            Ok(Ok(())) => Ok(card),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(anyhow!(
                "bridged's PipeWire node was not linked to {what} within {START_TIMEOUT:?} (is each node there, with \
                 the card's channel positions?)"
            )),
        }
    }

    /// Stops the node: nothing more is captured or played.
    pub fn stop(&self) {
        // The receiver is gone already when the thread ended on an error.
        let _ = self.quit.send(());
    }
}

impl Drop for PipeWireCard {
    fn drop(&mut self) {
        self.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

type Ready = mpsc::Sender<anyhow::Result<()>>;

/// The node's thread: makes the node, links it as its ports and the card's appear, then runs
/// PipeWire's loop until told to quit.
fn run(opening: Opening, quit: pw::channel::Receiver<()>, ready: &Ready) -> anyhow::Result<()> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None).context("PipeWire main loop")?;
    let context = pw::context::ContextRc::new(&mainloop, None).context("PipeWire context")?;
    let core = context.connect_rc(None).context("PipeWire does not answer on its socket")?;
    let registry = core.get_registry_rc().context("PipeWire registry")?;
    let Opening { rate, period, capture, playback, shared } = opening;

    let wanted = Wanted {
        capture: capture.as_ref().map(|c| target(&c.endpoint)),
        playback: playback.as_ref().map(|p| target(&p.endpoint)),
    };
    let wiring = Rc::new(RefCell::new(Wiring {
        core: core.clone(),
        graph: Graph::default(),
        ours: None,
        wanted,
        links: BTreeMap::new(),
        ready: Some(ready.clone()),
    }));

    let mut builder = filter::Builder::new(&core, "partyline-bridged", node_properties(rate, period))?;
    let mut ports = |capture: bool| -> anyhow::Result<[Port; CHANNELS]> {
        let direction = if capture { Direction::Input } else { Direction::Output };
        let mut ports = [None; CHANNELS];
        for (port, position) in ports.iter_mut().zip(POSITIONS) {
            *port = Some(builder.port(direction, &wiring::port_name(capture, position), position)?);
        }
        Ok(ports.map(|port| port.expect("every position has its port")))
    };
    let capture = capture.map(|c| ports(true).map(|ports| (c.mixing, ports))).transpose()?;
    let playback = playback.map(|p| ports(false).map(|ports| (p.queue, ports))).transpose()?;
    let mut cycles = Cycles { rate, capture, playback, block: Vec::new(), wrong_rate: false, promoted: false };

    let watch = wiring.clone();
    let _filter = builder.connect(
        move |cycle| cycles.run(cycle),
        move |state| match state {
            State::Paused { node } | State::Streaming { node } => {
                let mut wiring = watch.borrow_mut();
                wiring.ours = Some(node);
                wiring.relink();
            }
            State::Error(error) => {
                let text = format!("PipeWire node: {error}");
                tracing::error!("sound card: {text}");
                if let Some(ready) = watch.borrow_mut().ready.take() {
                    let _ = ready.send(Err(anyhow!(text.clone())));
                }
                shared.set_pipeline_error(Some(text));
            }
            State::Connecting | State::Unconnected => {}
        },
    )?;
    let _registry_listener = follow_graph(&registry, &wiring);

    let quitting = mainloop.clone();
    let _quit = quit.attach(mainloop.loop_(), move |()| quitting.quit());
    mainloop.run();
    // The links, then the node, go before the core and the loop.
    wiring.borrow_mut().links.clear();
    Ok(())
}

/// Keeps `wiring`'s graph up to date with the registry's nodes and ports, relinking at each
/// change.
fn follow_graph(registry: &pw::registry::RegistryRc, wiring: &Rc<RefCell<Wiring>>) -> pw::registry::Listener {
    let (added, removed) = (wiring.clone(), wiring.clone());
    registry
        .add_listener_local()
        .global(move |global| {
            let Some(props) = global.props else { return };
            let mut wiring = added.borrow_mut();
            match global.type_ {
                pw::types::ObjectType::Node => {
                    let Some(name) = props.get(*pw::keys::NODE_NAME) else { return };
                    wiring.graph.add_node(global.id, name);
                }
                pw::types::ObjectType::Port => {
                    let Some(port) = port_info(props) else { return };
                    wiring.graph.add_port(global.id, port);
                }
                _ => return,
            }
            wiring.relink();
        })
        .global_remove(move |id| {
            let mut wiring = removed.borrow_mut();
            wiring.graph.remove(id);
            wiring.relink();
        })
        .register()
}

/// A port as the registry's properties describe it (`None` without its node).
fn port_info(props: &pw::spa::utils::dict::DictRef) -> Option<PortInfo> {
    Some(PortInfo {
        node: props.get(*pw::keys::NODE_ID)?.parse().ok()?,
        output: props.get(*pw::keys::PORT_DIRECTION) == Some("out"),
        monitor: props.get(*pw::keys::PORT_MONITOR) == Some("true"),
        channel: props.get(*pw::keys::AUDIO_CHANNEL).map(str::to_owned),
        name: props.get(*pw::keys::PORT_NAME).map(str::to_owned),
    })
}

/// The node's properties: a duplex node of bridged's at the card's period and rate.
fn node_properties(rate: u32, period: u32) -> pw::properties::PropertiesBox {
    pw::properties::properties! {
        *pw::keys::MEDIA_TYPE => "Audio",
        *pw::keys::MEDIA_CATEGORY => "Duplex",
        *pw::keys::NODE_NAME => "partyline-bridged",
        *pw::keys::NODE_DESCRIPTION => "partyline-bridged",
        *pw::keys::APP_NAME => "partyline-bridged",
        *pw::keys::NODE_LATENCY => format!("{period}/{rate}"),
        // The graph runs at the card's rate (DSP ports carry the graph's rate, unconverted).
        *pw::keys::NODE_RATE => format!("1/{rate}"),
    }
}

/// The node `endpoint` names (a PipeWire endpoint always names one: `card.rs`).
fn target(endpoint: &Endpoint) -> Target {
    Target { node: endpoint.device.clone().unwrap_or_default(), monitor: endpoint.monitor }
}

/// The node's links, made as the graph's ports appear (main loop's thread).
struct Wiring {
    core: pw::core::CoreRc,
    graph: Graph,
    /// Bridged's node, once connected.
    ours: Option<u32>,
    wanted: Wanted,
    links: BTreeMap<wiring::Link, pw::link::Link>,
    /// Told once when every link is made (or the node failed).
    ready: Option<Ready>,
}

impl Wiring {
    /// Makes the links the graph now allows and drops those whose ports went.
    fn relink(&mut self) {
        let Some(ours) = self.ours else { return };
        let links = self.graph.links(ours, &self.wanted);
        self.links.retain(|link, _| links.contains(link));
        for link in links {
            if self.links.contains_key(&link) {
                continue;
            }
            let properties = pw::properties::properties! {
                *pw::keys::LINK_OUTPUT_NODE => link.output_node.to_string(),
                *pw::keys::LINK_OUTPUT_PORT => link.output_port.to_string(),
                *pw::keys::LINK_INPUT_NODE => link.input_node.to_string(),
                *pw::keys::LINK_INPUT_PORT => link.input_port.to_string(),
                // Gone with bridged's connection, never left behind.
                *pw::keys::OBJECT_LINGER => "false",
            };
            match self.core.create_object::<pw::link::Link>("link-factory", &properties) {
                Ok(proxy) => {
                    self.links.insert(link, proxy);
                }
                Err(error) => tracing::warn!("sound card: PipeWire did not link port {link:?}: {error}"),
            }
        }
        if self.links.len() == self.wanted.links()
            && let Some(ready) = self.ready.take()
        {
            tracing::info!("sound card: bridged's PipeWire node linked ({} links)", self.links.len());
            let _ = ready.send(Ok(()));
        }
    }
}

/// What runs every cycle, in PipeWire's data thread: no allocation once `block` has grown to a
/// cycle, no lock but the mix's and the playback queue's.
struct Cycles {
    rate: u32,
    capture: Option<(Mixing, [Port; CHANNELS])>,
    playback: Option<(Arc<Mutex<Jitter>>, [Port; CHANNELS])>,
    /// The played block, interleaved.
    block: Vec<f32>,
    wrong_rate: bool,
    /// PipeWire's data thread runs under SCHED_FIFO: PipeWire's client library leaves it an
    /// ordinary thread unless the context loads its RT module, which the default client
    /// configuration does not (measured: SCHED_OTHER, preempted about once a cycle).
    promoted: bool,
}

impl Cycles {
    fn run(&mut self, cycle: &mut Cycle<'_>) {
        if !self.promoted {
            self.promoted = true;
            realtime::promote("the card's PipeWire node");
        }
        let frames = cycle.frames();
        if cycle.rate() != self.rate {
            // The graph did not take the card's rate: everything downstream counts in it.
            if !self.wrong_rate {
                self.wrong_rate = true;
                tracing::error!(
                    "sound card: PipeWire's graph runs at {} Hz, not the card's {} Hz: silent until it does",
                    cycle.rate(),
                    self.rate
                );
            }
            self.silence(cycle);
            return;
        }
        self.wrong_rate = false;
        if let Some((mixing, ports)) = &mut self.capture {
            mixing.block(|input| interleave(cycle, ports, frames, input));
        }
        if let Some((queue, ports)) = &self.playback {
            self.block.resize(frames * CHANNELS, 0.0);
            lock(queue).pull(&mut self.block);
            for (channel, port) in ports.iter().enumerate() {
                if let Some(out) = cycle.output(*port) {
                    for (sample, frame) in out.iter_mut().zip(self.block.chunks_exact(CHANNELS)) {
                        *sample = frame[channel];
                    }
                }
            }
        }
    }

    fn silence(&self, cycle: &mut Cycle<'_>) {
        for port in self.playback.iter().flat_map(|(_, ports)| ports) {
            if let Some(out) = cycle.output(*port) {
                out.fill(0.0);
            }
        }
    }
}

/// The capture's ports this cycle as one interleaved block in `into` (silence on a port that
/// nothing is linked to).
fn interleave(cycle: &Cycle<'_>, ports: &[Port; CHANNELS], frames: usize, into: &mut Vec<f32>) {
    into.clear();
    into.resize(frames * CHANNELS, 0.0);
    for (channel, port) in ports.iter().enumerate() {
        if let Some(samples) = cycle.input(*port) {
            for (frame, sample) in into.chunks_exact_mut(CHANNELS).zip(samples) {
                frame[channel] = *sample;
            }
        }
    }
}

//! A safe wrapper for the part of PipeWire's `pw_filter` the card needs, which the `pipewire`
//! crate (0.10) does not wrap: one node with DSP ports (F32 mono at the graph's rate, one port per
//! channel), a process callback run in PipeWire's data thread once per graph cycle, and the
//! node's state. Everything here is called from the thread that runs the PipeWire main loop the
//! filter was made on, except the process callback (the data thread).

#![allow(unsafe_code, reason = "the pw_filter calls of pipewire-sys, each with its safety argument")]

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr::NonNull;

use anyhow::{anyhow, bail};
use pipewire as pw;
use pw::spa::sys as spa_sys;
use pw::sys as pw_sys;

/// A port of the filter, as [`Builder::port`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port(usize);

/// The filter's state, as its state callback reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Connecting,
    /// Connected, its node registered (`node`: its id in the graph), not running.
    Paused {
        node: u32,
    },
    Streaming {
        node: u32,
    },
    Unconnected,
    Error(String),
}

/// One graph cycle, as the process callback sees it.
pub struct Cycle<'a> {
    ports: &'a [NonNull<c_void>],
    frames: usize,
    rate: u32,
}

impl Cycle<'_> {
    /// The frames this cycle (the graph's quantum).
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The graph's rate this cycle.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// An input port's samples this cycle, `None` while nothing is linked to it.
    pub fn input(&self, port: Port) -> Option<&[f32]> {
        let data = self.dsp_buffer(port)?;
        // SAFETY: for this cycle PipeWire hands the port a buffer of `frames` F32 samples
        // (the DSP format), aligned for f32; it is not written to while the callback runs, and
        // the slice does not outlive this `Cycle` (borrowed from it).
        Some(unsafe { std::slice::from_raw_parts(data.cast::<f32>().as_ptr(), self.frames) })
    }

    /// An output port's samples to fill this cycle, `None` when PipeWire has no buffer for it.
    pub fn output(&mut self, port: Port) -> Option<&mut [f32]> {
        let data = self.dsp_buffer(port)?;
        // SAFETY: as for `input`; each port has a buffer of its own, and `&mut self` allows one
        // output slice at a time.
        Some(unsafe { std::slice::from_raw_parts_mut(data.cast::<f32>().as_ptr(), self.frames) })
    }

    fn dsp_buffer(&self, port: Port) -> Option<NonNull<c_void>> {
        let port = *self.ports.get(port.0)?;
        let frames = u32::try_from(self.frames).ok()?;
        // SAFETY: `port` is a port of this filter (added by the builder, removed only with the
        // filter), called from the process callback as pw_filter_get_dsp_buffer requires.
        NonNull::new(unsafe { pw_sys::pw_filter_get_dsp_buffer(port.as_ptr(), frames) })
    }
}

type ProcessFn = Box<dyn FnMut(&mut Cycle<'_>) + Send>;
type StateFn = Box<dyn FnMut(State)>;

/// What the process callback gets: the ports and the handler. Touched by the data thread only
/// once the filter is connected.
struct Processing {
    ports: Vec<NonNull<c_void>>,
    handler: ProcessFn,
}

/// What the state callback gets (main loop thread).
struct Watching {
    filter: NonNull<pw_sys::pw_filter>,
    handler: StateFn,
}

/// A filter being set up: ports are added before it connects.
pub struct Builder {
    raw: NonNull<pw_sys::pw_filter>,
    ports: Vec<NonNull<c_void>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").field("ports", &self.ports.len()).finish_non_exhaustive()
    }
}

impl Builder {
    /// A filter node on `core` named `name`, with the node properties `properties`.
    pub fn new(
        core: &pw::core::Core,
        name: &str,
        properties: pw::properties::PropertiesBox,
    ) -> anyhow::Result<Builder> {
        let name = CString::new(name)?;
        // SAFETY: `core` is connected and outlives the filter (the caller destroys the filter
        // first: `Filter` is dropped before the core in `pipewire_card::run`); the properties'
        // ownership passes to the filter.
        let raw = unsafe { pw_sys::pw_filter_new(core.as_raw_ptr(), name.as_ptr(), properties.into_raw()) };
        let raw = NonNull::new(raw).ok_or_else(|| anyhow!("PipeWire did not make a filter"))?;
        Ok(Builder { raw, ports: Vec::new() })
    }

    /// Adds a DSP port (F32 mono) named `name` in `direction`, for the channel `channel`.
    pub fn port(&mut self, direction: pw::spa::utils::Direction, name: &str, channel: &str) -> anyhow::Result<Port> {
        let properties = pw::properties::properties! {
            *pw::keys::FORMAT_DSP => "32 bit float mono audio",
            *pw::keys::PORT_NAME => name,
            *pw::keys::AUDIO_CHANNEL => channel,
        };
        // SAFETY: the filter is not connected yet; the properties' ownership passes to the port;
        // no params; the returned pointer stays valid until the filter is destroyed.
        let port = unsafe {
            pw_sys::pw_filter_add_port(
                self.raw.as_ptr(),
                direction.as_raw(),
                pw_sys::pw_filter_port_flags_PW_FILTER_PORT_FLAG_MAP_BUFFERS,
                0,
                properties.into_raw(),
                std::ptr::null_mut(),
                0,
            )
        };
        let port = NonNull::new(port).ok_or_else(|| anyhow!("PipeWire did not add the filter's port {name}"))?;
        self.ports.push(port);
        Ok(Port(self.ports.len() - 1))
    }

    /// Connects the filter: `process` runs in PipeWire's data thread once per cycle (real-time:
    /// no blocking, no allocation), `state` in the main loop's thread at each state change.
    pub fn connect(
        mut self,
        process: impl FnMut(&mut Cycle<'_>) + Send + 'static,
        state: impl FnMut(State) + 'static,
    ) -> anyhow::Result<Filter> {
        let (raw, ports) = (self.raw, std::mem::take(&mut self.ports));
        // The filter is the `Filter`'s to destroy from here on.
        std::mem::forget(self);
        let mut filter = Filter {
            raw,
            processing: Box::new(Processing { ports, handler: Box::new(process) }),
            watching: Box::new(Watching { filter: raw, handler: Box::new(state) }),
            // SAFETY: spa_hook is a plain C struct for which all zeroes is the unlinked hook
            // (`spa_zero(hook)` in PipeWire's own examples).
            hooks: Box::new(unsafe { std::mem::zeroed() }),
        };
        let processing: *mut Processing = &raw mut *filter.processing;
        let watching: *mut Watching = &raw mut *filter.watching;
        // SAFETY: the hooks and the data live in boxes the `Filter` owns, whose `Drop` destroys
        // the filter (removing the listeners) before they are freed; the event tables are static.
        unsafe {
            pw_sys::pw_filter_add_listener(raw.as_ptr(), &raw mut filter.hooks[0], &PROCESS_EVENTS, processing.cast());
            pw_sys::pw_filter_add_listener(raw.as_ptr(), &raw mut filter.hooks[1], &STATE_EVENTS, watching.cast());
        }
        // SAFETY: a filter with its ports added; no params.
        let result = unsafe {
            pw_sys::pw_filter_connect(
                raw.as_ptr(),
                pw_sys::pw_filter_flags_PW_FILTER_FLAG_RT_PROCESS,
                std::ptr::null_mut(),
                0,
            )
        };
        if result < 0 {
            bail!("connecting the PipeWire filter: {}", std::io::Error::from_raw_os_error(-result));
        }
        Ok(filter)
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // Only reached when `connect` was not (it takes the pointer into the `Filter`).
        // SAFETY: the filter has no listener yet and is not used after this.
        unsafe { pw_sys::pw_filter_destroy(self.raw.as_ptr()) };
    }
}

/// A connected filter; destroyed (disconnected, its node gone from the graph) when dropped.
pub struct Filter {
    raw: NonNull<pw_sys::pw_filter>,
    processing: Box<Processing>,
    watching: Box<Watching>,
    hooks: Box<[spa_sys::spa_hook; 2]>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter").field("ports", &self.processing.ports.len()).finish_non_exhaustive()
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        // SAFETY: on the main loop's thread, as everything but the process callback; after this
        // no callback runs (destroy removes the listeners and stops the data thread's use), so
        // the boxes may then be freed.
        unsafe { pw_sys::pw_filter_destroy(self.raw.as_ptr()) };
    }
}

static PROCESS_EVENTS: pw_sys::pw_filter_events = pw_sys::pw_filter_events {
    version: pw_sys::PW_VERSION_FILTER_EVENTS,
    destroy: None,
    state_changed: None,
    io_changed: None,
    param_changed: None,
    add_buffer: None,
    remove_buffer: None,
    process: Some(on_process),
    drained: None,
    command: None,
};

static STATE_EVENTS: pw_sys::pw_filter_events = pw_sys::pw_filter_events {
    version: pw_sys::PW_VERSION_FILTER_EVENTS,
    destroy: None,
    state_changed: Some(on_state_changed),
    io_changed: None,
    param_changed: None,
    add_buffer: None,
    remove_buffer: None,
    process: None,
    drained: None,
    command: None,
};

unsafe extern "C" fn on_process(data: *mut c_void, position: *mut spa_sys::spa_io_position) {
    // SAFETY: `data` is the `Processing` registered with this table, alive while the listener is
    // (see `Filter`'s Drop), and only this callback touches it once connected; `position` is the
    // driver's position for this cycle, read only, or null.
    let (processing, position) = unsafe { (&mut *data.cast::<Processing>(), position.as_ref()) };
    let Some(position) = position else { return };
    let frames = usize::try_from(position.clock.duration).unwrap_or(0);
    let rate = position.clock.rate.denom;
    let mut cycle = Cycle { ports: &processing.ports, frames, rate };
    (processing.handler)(&mut cycle);
}

unsafe extern "C" fn on_state_changed(
    data: *mut c_void,
    _old: pw_sys::pw_filter_state,
    state: pw_sys::pw_filter_state,
    error: *const c_char,
) {
    // SAFETY: `data` is the `Watching` registered with this table, alive while the listener is;
    // state callbacks run on the main loop's thread, one at a time; `error` is null or a C string
    // valid for the call.
    let watching = unsafe { &mut *data.cast::<Watching>() };
    // SAFETY: the filter is alive while its listeners are.
    let node = unsafe { pw_sys::pw_filter_get_node_id(watching.filter.as_ptr()) };
    let state = match state {
        pw_sys::pw_filter_state_PW_FILTER_STATE_CONNECTING => State::Connecting,
        pw_sys::pw_filter_state_PW_FILTER_STATE_PAUSED => State::Paused { node },
        pw_sys::pw_filter_state_PW_FILTER_STATE_STREAMING => State::Streaming { node },
        pw_sys::pw_filter_state_PW_FILTER_STATE_UNCONNECTED => State::Unconnected,
        _ => {
            // SAFETY: see above.
            let text = (!error.is_null()).then(|| unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned());
            State::Error(text.unwrap_or_else(|| "unknown error".into()))
        }
    };
    (watching.handler)(state);
}

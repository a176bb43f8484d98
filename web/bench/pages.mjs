// What the panel benchmark measures inside the pages, added from the outside: the panel itself
// carries no benchmark code. `INSTRUMENTED` (options of Person.open) makes the page's context
// with Playwright's `bypassCSP`, so that an AudioWorklet module of the benchmark's own may load
// from a blob: URL (the panel's CSP allows scripts from 'self' only, and Playwright's routes do
// not reach a worklet's module request), and, before the page's scripts run, keeps a reference
// to what the page gets from getUserMedia (its microphone) and to its RTCPeerConnections (for
// getStats); it changes neither.

/** The envelope's window: 1 ms at 48 kHz. */
export const ENVELOPE_RATE = 48_000;

// The envelope of the input: the RMS of every 1 ms window, posted every 8 render quanta with the
// frame at the end of the last quantum, which the page stamps on arrival (see `envelope`).
const WORKLET = `
class Envelope extends AudioWorkletProcessor {
  constructor() {
    super();
    this.size = Math.round(sampleRate / 1000);
    this.sum = 0;
    this.n = 0;
    this.rms = [];
    this.first = -1;
    this.blocks = 0;
  }

  process(inputs) {
    const samples = inputs[0] && inputs[0][0];
    for (let i = 0; i < 128; i += 1) {
      const v = samples ? samples[i] : 0;
      if (this.n === 0 && this.first < 0) this.first = currentFrame + i;
      this.sum += v * v;
      this.n += 1;
      if (this.n === this.size) {
        this.rms.push(Math.sqrt(this.sum / this.size));
        this.sum = 0;
        this.n = 0;
      }
    }
    this.blocks += 1;
    if (this.blocks % 8 === 0) {
      this.port.postMessage({ frame: currentFrame + 128, first: this.first, rms: this.rms });
      this.rms = [];
    }
    return true;
  }
}
registerProcessor('bench-envelope', Envelope);
`;

/** Person.open's options for a page the benchmark measures in. */
export const INSTRUMENTED = { contextOptions: { bypassCSP: true }, prepare: instrument };

/** Keeps the page's microphone and peer connections. */
async function instrument(context) {
  await context.addInitScript(() => {
    const devices = navigator.mediaDevices;
    const getUserMedia = devices.getUserMedia.bind(devices);
    devices.getUserMedia = async (constraints) => {
      const stream = await getUserMedia(constraints);
      window.benchMicrophone = stream;
      return stream;
    };
    const Native = window.RTCPeerConnection;
    window.RTCPeerConnection = class extends Native {
      constructor(...args) {
        super(...args);
        (window.benchPeerConnections ??= []).push(this);
      }
    };
  });
}

/**
 * Starts an envelope of what the page hears on line `line` (a group id, or `{ selector }`: the
 * media element whose stream to measure), or of its microphone (`line` null), under `key`: an AudioContext of its own at 48 kHz with the worklet on a
 * MediaStreamSource of that stream.
 */
export async function startEnvelope(page, key, line) {
  await page.evaluate(
    async ([name, groupId, code, rate]) => {
      const stream =
        groupId === null
          ? window.benchMicrophone
          : document.querySelector(groupId.selector ?? `[data-line="${groupId}"] .line-audio`)?.srcObject;
      if (!stream) throw new Error(`no stream to measure for ${groupId ?? 'the microphone'}`);
      const ctx = new AudioContext({ sampleRate: rate });
      await ctx.resume();
      const module = URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
      await ctx.audioWorklet.addModule(module);
      URL.revokeObjectURL(module);
      const node = new AudioWorkletNode(ctx, 'bench-envelope', { numberOfInputs: 1, numberOfOutputs: 0 });
      ctx.createMediaStreamSource(stream).connect(node);
      const probe = { ctx, node, rms: [], first: -1, offset: Infinity };
      node.port.onmessage = ({ data }) => {
        // A quantum is processed before its message arrives: the earliest arrival against its
        // frame bounds when the audio went through the graph.
        const now = performance.timeOrigin + performance.now();
        probe.offset = Math.min(probe.offset, now - (data.frame / rate) * 1000);
        if (probe.first < 0) probe.first = data.first;
        for (const v of data.rms) probe.rms.push(v);
      };
      (window.benchEnvelopes ??= {})[name] = probe;
    },
    [key, line, WORKLET, ENVELOPE_RATE],
  );
}

/**
 * The envelope `key` so far: `{ startMs, db }`: the wall-clock time (epochMs) of the first 1 ms
 * window and every window's level in dBFS (one decimal); `clear` empties it.
 */
export function readEnvelope(page, key, { clear = false } = {}) {
  return page.evaluate(
    ([name, empty, rate]) => {
      const probe = window.benchEnvelopes[name];
      const startMs = probe.offset + (probe.first / rate) * 1000;
      const db = probe.rms.map((v) => (v > 0 ? Math.max(-100, Math.round(200 * Math.log10(v)) / 10) : -100));
      if (empty) {
        probe.first += probe.rms.length * (rate / 1000);
        probe.rms = [];
      }
      return { startMs, db };
    },
    [key, clear, ENVELOPE_RATE],
  );
}

/** Stops the envelope `key` (its AudioContext closed). */
export function stopEnvelope(page, key) {
  return page.evaluate(async (name) => {
    const probe = window.benchEnvelopes?.[name];
    if (!probe) return;
    probe.node.port.onmessage = null;
    await probe.ctx.close();
    delete window.benchEnvelopes[name];
  }, key);
}

/**
 * The receiving side of the page's peer connections (inbound-rtp audio): the counters that say
 * whether audio came in on time, summed over the connections.
 */
export function inboundStats(page) {
  return page.evaluate(async () => {
    const sum = {
      packetsReceived: 0,
      packetsLost: 0,
      concealedSamples: 0,
      silentConcealedSamples: 0,
      totalSamplesReceived: 0,
      concealmentEvents: 0,
      jitterBufferDelay: 0,
      jitterBufferEmittedCount: 0,
      jitter: 0,
    };
    for (const pc of window.benchPeerConnections ?? []) {
      if (pc.connectionState === 'closed') continue;
      for (const report of (await pc.getStats()).values()) {
        if (report.type !== 'inbound-rtp' || report.kind !== 'audio') continue;
        for (const key of Object.keys(sum)) {
          if (key === 'jitter') sum.jitter = Math.max(sum.jitter, report.jitter ?? 0);
          else sum[key] += report[key] ?? 0;
        }
      }
    }
    return sum;
  });
}

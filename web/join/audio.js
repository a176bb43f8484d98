// The panel's audio: one AudioContext; the microphone's meter; per line, what the room sends
// through a gain (listen × volume) to the loudspeaker, metered after the gain.
//
// Every meter is the RMS of the last 2048 samples, rising at once and falling 30 dB/s (as a desk's
// meter does, so a short word stays readable), published as a dBFS number with one decimal:
// digital silence is -100.

export const SILENCE_DB = -100;
const METER_FLOOR_DB = -60;
const RELEASE_DB_PER_TICK = 1.5; // at one tick per 50 ms: 30 dB/s
export const METER_INTERVAL_MS = 50;

let context = null;

/**
 * The page's AudioContext, created (or resumed) on first use. Call it inside a user gesture
 * first: browsers start an AudioContext only after one, phones most strictly.
 */
export function audioContext() {
  context ??= new AudioContext({ latencyHint: 'interactive' });
  if (context.state === 'suspended') context.resume().catch(() => {});
  return context;
}

/** An RMS meter on an audio node: `read()` measures, moves the ballistics, returns dBFS. */
export class Meter {
  constructor() {
    this.analyser = null;
    this.samples = null;
    this.shown = SILENCE_DB;
  }

  /** Measures what `node` outputs from now on. */
  tap(node) {
    this.analyser = node.context.createAnalyser();
    this.analyser.fftSize = 2048;
    this.samples = new Float32Array(this.analyser.fftSize);
    node.connect(this.analyser);
    this.shown = SILENCE_DB;
  }

  untap() {
    this.analyser?.disconnect();
    this.analyser = this.samples = null;
    this.shown = SILENCE_DB;
  }

  get attached() {
    return this.analyser !== null;
  }

  read() {
    if (!this.analyser) return null;
    this.analyser.getFloatTimeDomainData(this.samples);
    let sum = 0;
    for (const sample of this.samples) sum += sample * sample;
    const rms = Math.sqrt(sum / this.samples.length);
    const db = rms > 0 ? Math.max(SILENCE_DB, 20 * Math.log10(rms)) : SILENCE_DB;
    this.shown = db > this.shown ? db : Math.max(db, this.shown - RELEASE_DB_PER_TICK);
    return this.shown;
  }
}

/** Draws `db` (or null: no stream) on a `.meter` element and its optional value label. */
export function drawMeter(element, valueElement, db) {
  const shown = Math.max(METER_FLOOR_DB, db ?? METER_FLOOR_DB);
  element.style.setProperty('--level', ((shown - METER_FLOOR_DB) / -METER_FLOOR_DB).toFixed(3));
  element.setAttribute('aria-valuenow', String(Math.round(shown)));
  if (valueElement) {
    valueElement.textContent = db === null ? '—' : db <= METER_FLOOR_DB ? '< −60 dB' : `${Math.round(db)} dB`;
  }
}

/** A volume slider's 0–100 as a gain: a fader's taper (square law), 0 is silence. */
export const volumeGain = (volume) => (Math.max(0, Math.min(100, volume)) / 100) ** 2;

/**
 * What one line plays: the room's stream → gain → loudspeaker, with a meter after the gain.
 * Chrome feeds a remote WebRTC stream to WebAudio only while a media element plays it: a muted
 * `<audio>` element plays it, WebAudio makes the sound.
 */
export class LineOutput {
  /** `element`: the line's `<audio>` (in its card, so the stream a line receives can be found). */
  constructor(element = new Audio()) {
    this.element = element;
    this.element.muted = true;
    this.element.autoplay = true;
    this.source = null;
    this.gain = null;
    this.meter = new Meter();
    this.level = 1;
    this.dim = 1;
  }

  /** Plays `stream` (a MediaStream with the room's audio), or nothing when null. */
  attach(stream) {
    this.detach();
    if (!stream) return;
    const ctx = audioContext();
    this.element.srcObject = stream;
    this.element.play().catch(() => {});
    this.source = ctx.createMediaStreamSource(stream);
    this.gain = ctx.createGain();
    this.gain.gain.value = this.level * this.dim;
    this.source.connect(this.gain);
    this.gain.connect(ctx.destination);
    this.meter.tap(this.gain);
  }

  detach() {
    this.meter.untap();
    this.source?.disconnect();
    this.gain?.disconnect();
    this.source = this.gain = null;
    this.element.srcObject = null;
  }

  /** Sets the gain (0..1), with a 10 ms ramp: no click. */
  setLevel(level) {
    this.level = level;
    this.ramp(0.01);
  }

  /**
   * Dims by `db` (0: not at all) on top of the gain: down with a 10 ms ramp, back up with a
   * 150 ms one (a ducker's release), never a click.
   */
  setDim(db) {
    const dim = 10 ** (db / 20);
    if (dim === this.dim) return;
    const rising = dim > this.dim;
    this.dim = dim;
    this.ramp(rising ? 0.15 : 0.01);
  }

  ramp(timeConstant) {
    if (this.gain) this.gain.gain.setTargetAtTime(this.level * this.dim, this.gain.context.currentTime, timeConstant);
  }
}

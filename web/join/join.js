// The crew panel at `/`: pick a position or a group (or open a preset link), type a name, and
// work the lines: per line listen on/off, volume, a talk key (hold to talk, tap to latch), an
// activity light with who talks, a call button. Plain ES modules, no build step; Janus's library
// is served by control at /vendor/.
//
// Observable state, for people and for browser tests alike (no test-only code paths):
//   <html data-state="idle|joining|connected|reconnecting|kicked|error">
//   <html data-level-out="-23.4">  dBFS of the microphone (absent while there is none)
//   per line, <li data-line="GROUP_ID"> with
//     data-listen="on|off"                   off also on a talk-only line
//     data-talk="off|momentary|latched|remote"  absent on a listen-only line; remote: held on by
//                                            the panel's remote control (a control surface)
//     data-active="true|false"               someone else talks on it
//     data-talkers="Alice,Bob"               who
//     data-call="true|false"                 a call signal in the last 5 s
//     data-level-in="-31.0"                  dBFS of the line as heard (after listen and
//                                            volume; -100 silence; absent without a stream)
//     data-ended="removed"                   the admin took this line away (its card says so;
//                                            the other lines go on); absent otherwise
//     data-admin="muted|line-muted"          the admin muted this user on the line, or the whole
//                                            line: its talk key is refused (absent otherwise)
//     data-talk-refused="muted|line-muted"   the last press of its talk key was refused
//     data-released="surface-silent|admin"   the talk key was let go by control: its remote
//                                            control's surface went silent, or the admin
//   <html data-remote-applied="N">           commands of the remote control applied so far
//   and controls with data-action="listen|talk|volume|call"; the line's stream plays (muted:
//   the sound goes through the page's WebAudio gain) in the card's <audio class="line-audio">.
// Meters are the RMS of the last 2048 samples, rising at once and falling 30 dB/s.

import { initTheme } from '/common/theme.js';
import { LineOutput, Meter, METER_INTERVAL_MS, audioContext, drawMeter, volumeGain } from '/join/audio.js';
import { Connection, KickedError, initJanus, microphoneProblem } from '/join/connection.js';
import { drawQr } from '/common/qr.js';

/** A press shorter than this is a tap: it latches the talk key (a second tap releases it). */
const TAP_MS = 300;
/** How long a call signal flashes a line. */
const CALL_MS = 5_000;
const BACKOFF_MS = [1_000, 2_000, 4_000, 8_000, 15_000];
const KICKED_DETAIL = 'An admin ended your connection. Join again only if you should be on these lines.';
const FORM_KEY = 'partyline.join';
const LINES_KEY = 'partyline.lines';
const DEFAULT_VOLUME = 80;

const root = document.documentElement;
const $ = (id) => document.getElementById(id);
const ui = {
  joinView: $('join-view'),
  form: $('join-form'),
  preset: $('preset'),
  groupField: $('group-field'),
  groupLabel: $('group-label'),
  group: $('group'),
  username: $('username'),
  pinField: $('pin-field'),
  pin: $('pin'),
  join: $('join'),
  joinError: $('join-error'),
  callView: $('call-view'),
  who: $('who'),
  callName: $('call-name'),
  status: $('status-text'),
  message: $('call-message'),
  lines: $('lines'),
  template: $('line-template'),
  meterOut: $('meter-out'),
  leave: $('leave'),
  rejoin: $('rejoin'),
  theme: $('theme'),
  remote: $('remote'),
  remoteLink: $('remote-link'),
  remoteQr: $('remote-qr'),
  remoteCertificate: $('remote-certificate'),
  remoteSha256: $('remote-sha256'),
};

// ---------------------------------------------------------------------------------------------
// The API of control.

class HttpError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options = {}) {
  const response = await fetch(`/api${path}`, {
    ...options,
    headers: { Accept: 'application/json', ...(options.body ? { 'Content-Type': 'application/json' } : {}) },
  });
  const body = response.status === 204 ? {} : await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new HttpError(response.status, body.error ?? `${response.status} ${response.statusText}`, body.code);
  }
  return body;
}

/** A GET that answers null on 404: a route this control does not have (yet). */
const optional = (path) => api(path).catch((error) => {
  if (error instanceof HttpError && error.status === 404) return null;
  throw error;
});

// ---------------------------------------------------------------------------------------------
// The session: what the user asked for (kept over reconnects) and the lines' local state.

const session = {
  username: '',
  request: null, // the body of POST /api/token, without username and pin
  label: '', // what is being joined, for the status line
  pin: '',
  token: null, // the last answer of POST /api/token
  connection: null,
  attempt: 0,
  retryTimer: null,
  microphone: null, // MediaStreamTrack, kept over reconnects
  micMeter: new Meter(),
  micSource: null,
  lines: [], // Line, in panel order
  ended: new Set(), // group ids of the lines the admin took away: not asked for again on a rejoin
  netDown: new Set(), // group ids whose ICE path is away
  callAvailable: false,
  events: null, // AbortController of the session's event stream
  wakeLock: null,
};

let groupsById = new Map();

/** One line of the panel: its card, its audio and its state, kept over reconnects. */
class Line {
  constructor(info, index) {
    this.groupId = info.groupId;
    this.index = index;
    this.el = ui.template.content.firstElementChild.cloneNode(true);
    this.el.dataset.line = this.groupId;
    this.q = (selector) => this.el.querySelector(selector);
    this.output = new LineOutput(this.q('.line-audio'));
    this.people = new Map();
    this.ended = false;
    this.talk = 'off';
    this.admin = null; // null, 'muted' or 'line-muted': the admin's hold on the talk key
    this.pressed = null; // { source, at, ignore }
    this.callTimer = null;
    const saved = loadLineSettings()[this.groupId] ?? {};
    this.volume = Number.isFinite(saved.volume) ? saved.volume : DEFAULT_VOLUME;
    this.listenOn = saved.listen !== false;
    this.update(info);
    this.bind();
  }

  /** Applies the server's view of the line (name, room, rights). */
  update(info) {
    this.info = info;
    const name = info.name;
    this.q('.line-name').textContent = name;
    this.q('.line-key').textContent = this.index < 9 ? String(this.index + 1) : '';
    const listen = this.q('[data-action="listen"]');
    listen.disabled = !info.listen;
    listen.setAttribute('aria-label', `Listen to ${name}`);
    const volume = this.q('[data-action="volume"]');
    volume.value = String(this.volume);
    volume.disabled = !info.listen;
    volume.setAttribute('aria-label', `Volume of ${name}`);
    volume.setAttribute('aria-valuetext', `${this.volume} %`);
    this.q('.line-meter').setAttribute('aria-label', `Level of ${name}`);
    const talk = this.q('[data-action="talk"]');
    talk.hidden = !info.talk;
    talk.setAttribute('aria-label', `Talk on ${name}${this.index < 9 ? ` (key ${this.index + 1})` : ''}`);
    this.q('[data-action="call"]').setAttribute('aria-label', `Call ${name}`);
    this.el.classList.toggle('talk-only', !info.listen);
    this.el.classList.toggle('listen-only', !info.talk);
    if (info.talk) this.el.dataset.talk = this.talk;
    else delete this.el.dataset.talk;
    this.applyListen();
    this.showPeople();
  }

  get canTalk() {
    return this.info.talk && !this.ended;
  }

  /** What the admin's hold on this line shows. */
  setAdmin({ mutedByAdmin, lineMuted }) {
    this.admin = mutedByAdmin ? 'muted' : lineMuted ? 'line-muted' : null;
    if (this.admin) {
      this.el.dataset.admin = this.admin;
      if (this.talk !== 'off') this.setTalk('off');
    } else {
      delete this.el.dataset.admin;
      delete this.el.dataset.talkRefused;
    }
    const message = this.q('.line-admin');
    message.textContent = this.admin === 'muted'
      ? `Muted by the admin on ${this.info.name}: your talk key works again once released.`
      : this.admin === 'line-muted' ? `The admin muted ${this.info.name}: nobody is heard on it.` : '';
    message.hidden = !this.admin;
  }

  /** Control let the talk key go (`reason`): the card says why until the key is used again. */
  showReleased(reason) {
    this.el.dataset.released = reason;
    const message = this.q('.line-released');
    message.textContent = reason === 'surface-silent'
      ? 'Talk released: the remote control went silent.'
      : 'The admin switched your talk off.';
    message.hidden = false;
  }

  clearReleased() {
    delete this.el.dataset.released;
    this.q('.line-released').hidden = true;
  }

  get hearing() {
    return this.info.listen && this.listenOn && !this.ended;
  }

  bind() {
    const talk = this.q('[data-action="talk"]');
    talk.addEventListener('pointerdown', (event) => {
      if (event.button !== 0) return;
      // Keep receiving pointerup even if the finger slides off the key.
      talk.setPointerCapture(event.pointerId);
      pressTalk(this, 'pointer');
    });
    talk.addEventListener('pointerup', () => releaseTalk(this, 'pointer'));
    talk.addEventListener('pointercancel', () => releaseTalk(this, 'pointer'));
    talk.addEventListener('contextmenu', (event) => event.preventDefault());
    // Enter on the focused key (a keyboard "click") toggles the latch.
    talk.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter' || event.repeat) return;
      event.preventDefault();
      pressTalk(this, 'enter');
      releaseTalk(this, 'enter');
    });
    this.q('[data-action="listen"]').addEventListener('click', () => {
      this.listenOn = !this.listenOn;
      saveLineSettings();
      this.applyListen();
      reportState();
    });
    const volume = this.q('[data-action="volume"]');
    volume.addEventListener('input', () => {
      this.volume = Number(volume.value);
      volume.setAttribute('aria-valuetext', `${this.volume} %`);
      this.applyListen();
    });
    volume.addEventListener('change', () => {
      saveLineSettings();
      reportState();
    });
    this.q('[data-action="call"]').addEventListener('click', () => sendCall(this));
  }

  applyListen() {
    this.el.dataset.listen = this.hearing ? 'on' : 'off';
    const button = this.q('[data-action="listen"]');
    button.setAttribute('aria-pressed', String(this.hearing));
    this.q('.listen-text').textContent = !this.info.listen ? 'Talk only' : this.listenOn ? 'Listen' : 'Muted';
    this.output.setLevel(this.hearing ? volumeGain(this.volume) : 0);
  }

  setTalk(state) {
    if (!this.canTalk) return;
    if (state !== 'off') this.clearReleased();
    this.talk = state;
    this.el.dataset.talk = state;
    const key = this.q('[data-action="talk"]');
    key.setAttribute('aria-pressed', String(state !== 'off'));
    this.q('.talk-label').textContent = state === 'off' ? 'Talk' : 'Talking';
    this.q('.talk-sub').textContent = {
      latched: 'latched: tap to stop',
      momentary: 'release to stop',
      remote: 'by remote control: tap to stop',
    }[state] ?? 'hold or tap to latch';
    session.connection?.setTalking(this.groupId, state !== 'off');
    showMicMuted();
    reportState();
  }

  /** The line as the panel reports it to control (for its remote control). */
  report() {
    return {
      groupId: this.groupId,
      listen: this.hearing,
      volume: this.volume,
      talk: this.info.talk ? this.talk : 'off',
      active: this.el.dataset.active === 'true',
      talkers: this.el.dataset.talkers ? this.el.dataset.talkers.split(',') : [],
    };
  }

  /** Who is on the line and who has a talk key on: AudioBridge's participant lists. */
  setPeople(people) {
    this.people = new Map(people);
    this.showPeople();
  }

  showPeople() {
    // A talker has a talk key on: the panel is muted in the room whenever none is, so "unmuted"
    // is the key, as a hardware panel's talk lamp. (The rooms' voice-activity events flicker with
    // the gaps of speech; the lamp must not.)
    const talkers = [...this.people.values()].filter((p) => !p.muted).map((p) => p.display);
    this.el.dataset.active = String(talkers.length > 0);
    this.el.dataset.talkers = talkers.join(',');
    this.q('.line-talkers').textContent = talkers.length ? `${talkers.join(', ')} talking` : '';
    const others = [...this.people.values()].map((p) => p.display);
    const people = others.length === 0 ? 'Nobody else on the line' : `With ${others.join(', ')}`;
    this.q('.line-people').textContent = talkers.length ? ` · ${others.length + 1} on the line` : people;
    reportState();
  }

  showCall(from) {
    clearTimeout(this.callTimer);
    this.el.dataset.call = 'true';
    this.q('.line-talkers').textContent = `Call from ${from}`;
    this.callTimer = setTimeout(() => this.clearCall(), CALL_MS);
  }

  clearCall() {
    clearTimeout(this.callTimer);
    this.el.dataset.call = 'false';
    this.showPeople();
  }

  meter() {
    const db = this.output.meter.read();
    if (db === null) delete this.el.dataset.levelIn;
    else this.el.dataset.levelIn = db.toFixed(1);
    drawMeter(this.q('.line-meter'), null, db);
  }

  /** No connection: no audio, nobody on it. Listen, volume and a latched talk stay. */
  disconnect() {
    this.output.detach();
    this.people.clear();
    this.showPeople();
    delete this.el.dataset.levelIn;
  }

  /** The admin took this line away: no audio, no keys, a message on its card. */
  end() {
    if (this.ended) return;
    if (this.talk !== 'off') this.setTalk('off');
    this.pressed = null;
    this.ended = true;
    this.disconnect();
    this.clearCall();
    this.el.dataset.ended = 'removed';
    delete this.el.dataset.talk;
    this.applyListen();
    for (const action of ['talk', 'listen', 'volume', 'call']) this.q(`[data-action="${action}"]`).disabled = true;
    this.q('[data-action="talk"]').hidden = true;
    this.q('[data-action="call"]').hidden = true;
    this.q('.line-people').textContent = '';
    const message = this.q('.line-ended');
    message.textContent = `An admin took you off ${this.info.name}. Your other lines go on.`;
    message.hidden = false;
  }

  destroy() {
    this.disconnect();
    this.clearCall();
    this.el.remove();
  }
}

function loadLineSettings() {
  try {
    return JSON.parse(localStorage.getItem(LINES_KEY) ?? '{}');
  } catch {
    return {};
  }
}

function saveLineSettings() {
  const all = loadLineSettings();
  for (const line of session.lines) all[line.groupId] = { volume: line.volume, listen: line.listenOn };
  try {
    localStorage.setItem(LINES_KEY, JSON.stringify(all));
  } catch {
    // not remembered
  }
}

const lineById = (groupId) => session.lines.find((line) => line.groupId === groupId);

/**
 * The lines of a token answer. Before multi-line tokens control answered `{roomName}` only: one
 * line, listen and talk, named as its group.
 */
function linesOf(answer) {
  if (Array.isArray(answer.lines) && answer.lines.length > 0) {
    return answer.lines.map((line) => ({
      groupId: line.groupId,
      name: line.name ?? groupsById.get(line.groupId)?.name ?? line.groupId,
      roomName: line.roomName ?? line.groupId,
      listen: line.listen !== false,
      talk: line.talk !== false,
    }));
  }
  const id = answer.roomName;
  return [{ groupId: id, name: groupsById.get(id)?.name ?? id, roomName: id, listen: true, talk: true }];
}

/** Builds the panel's cards for `infos`, keeping the state of lines that stay. */
function setLines(infos) {
  const kept = new Map(session.lines.map((line) => [line.groupId, line]));
  session.lines = infos.map((info, index) => {
    const line = kept.get(info.groupId);
    kept.delete(info.groupId);
    if (!line) return new Line(info, index);
    line.index = index;
    line.update(info);
    return line;
  });
  // A line the admin took away keeps its card (and its message) until the user leaves.
  for (const gone of kept.values()) {
    if (gone.ended) session.lines.push(gone);
    else gone.destroy();
  }
  ui.lines.replaceChildren(...session.lines.map((line) => line.el));
  ui.lines.dataset.count = String(session.lines.length);
  showCallButtons();
}

// ---------------------------------------------------------------------------------------------
// Talk keys: press-and-hold talks while held; a tap (< 300 ms) latches, a second tap releases.
// While no key is on, the page is muted in every room (AudioBridge `configure`) and sends
// silence (each line's clone of the microphone is disabled).

function pressTalk(line, source) {
  if (!line.canTalk || root.dataset.state !== 'connected' || line.pressed) return;
  if (line.admin && line.talk === 'off') {
    // The admin holds this key: refused here, and undone by control should a client try anyway.
    line.el.dataset.talkRefused = line.admin;
    return;
  }
  if (line.talk === 'latched' || line.talk === 'remote') {
    // The second tap: off at once; its release does nothing.
    line.pressed = { source, ignore: true };
    line.setTalk('off');
    return;
  }
  line.pressed = { source, at: performance.now() };
  line.setTalk('momentary');
}

function releaseTalk(line, source) {
  const pressed = line.pressed;
  if (!pressed || pressed.source !== source) return;
  line.pressed = null;
  // Released meanwhile (the network went away): nothing left to do.
  if (pressed.ignore || line.talk !== 'momentary') return;
  line.setTalk(performance.now() - pressed.at < TAP_MS ? 'latched' : 'off');
}

/** Every held key lets go (a latched one stays): network loss, the window losing focus. */
function releaseMomentary() {
  for (const line of session.lines) {
    if (line.pressed && !line.pressed.ignore) line.pressed.ignore = true;
    if (line.talk === 'momentary') line.setTalk('off');
  }
}

/** The connection went away: a key held by the remote control lets go too (its key ends). */
function releaseHeld() {
  releaseMomentary();
  for (const line of session.lines) if (line.talk === 'remote') line.setTalk('off');
}

function showMicMuted() {
  ui.meterOut.toggleAttribute('data-muted', !session.lines.some((line) => line.talk !== 'off'));
}

/** The line a key talks on: `1`–`9` lines 1–9, space the first line with a talk key. */
function keyLine(event) {
  if (ui.callView.hidden || event.ctrlKey || event.metaKey || event.altKey) return null;
  if (event.target.closest?.('input:not([type="range"]), select, textarea')) return null;
  if (event.code === 'Space') return { line: session.lines.find((line) => line.canTalk), source: 'space' };
  const digit = /^Digit([1-9])$/.exec(event.code) ?? /^Numpad([1-9])$/.exec(event.code);
  if (!digit) return null;
  return { line: session.lines[Number(digit[1]) - 1], source: `key${digit[1]}` };
}

function initKeys() {
  document.addEventListener('keydown', (event) => {
    const key = keyLine(event);
    if (!key) return;
    event.preventDefault(); // no page scroll, no button activation, no slider step
    if (!event.repeat && key.line) pressTalk(key.line, key.source);
  });
  document.addEventListener('keyup', (event) => {
    const key = keyLine(event);
    if (!key) return;
    event.preventDefault();
    if (key.line) releaseTalk(key.line, key.source);
  });
  // A key or pointer released while the window was not focused is never reported.
  window.addEventListener('blur', releaseMomentary);
}

// ---------------------------------------------------------------------------------------------
// Calls: POST /api/call flashes a line on every panel on it; the session's event stream
// (Server-Sent Events) brings the calls. Both are optional: a control without them answers 404,
// and the panel then shows no call button.

function showCallButtons() {
  for (const line of session.lines) line.q('[data-action="call"]').hidden = !session.callAvailable || line.ended;
}

async function sendCall(line) {
  const token = session.token?.token;
  if (!token || root.dataset.state !== 'connected') return;
  const button = line.q('[data-action="call"]');
  button.disabled = true;
  try {
    await api('/call', { method: 'POST', body: JSON.stringify({ token, groupId: line.groupId }) });
  } catch (error) {
    if (error instanceof HttpError && error.status === 404 && /route not found/i.test(error.message)) {
      session.callAvailable = false;
      showCallButtons();
    } else {
      showMessage(`Call on ${line.info.name} failed: ${error.message}`, true);
    }
  } finally {
    setTimeout(() => { button.disabled = false; }, 1_000);
  }
}

/** Reads the session's event stream while `token` is the session's; reopens it when it drops. */
async function followEvents(token) {
  session.events?.abort();
  const abort = new AbortController();
  session.events = abort;
  while (!abort.signal.aborted) {
    try {
      const response = await fetch(`/api/session/events?token=${encodeURIComponent(token)}`, {
        headers: { Accept: 'text/event-stream' },
        signal: abort.signal,
      });
      if (response.status === 404 && !response.headers.get('content-type')?.includes('event-stream')) {
        const body = await response.json().catch(() => ({}));
        // The route is not there: no calls on this control. (A 404 about the token is a
        // token that ended: the reconnect brings a new one.)
        if (body.code === 'route_not_found' || /Route not found/.test(body.error ?? '')) {
          session.callAvailable = false;
          showCallButtons();
          return;
        }
      }
      if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
      session.callAvailable = true;
      showCallButtons();
      const reading = readEvents(response.body, abort.signal);
      reportState();
      await reading;
    } catch {
      // dropped: try again shortly, unless this session is over
    }
    if (abort.signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}

async function readEvents(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  signal.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true });
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const field of block.split('\n')) {
        if (field.startsWith('event:')) event = field.slice(6).trim();
        else if (field.startsWith('data:')) data.push(field.slice(5).replace(/^ /, ''));
      }
      if (data.length) onServerEvent(event, data.join('\n'));
    }
  }
}

function onServerEvent(event, data) {
  let body;
  try {
    body = JSON.parse(data);
  } catch {
    return;
  }
  const line = lineById(body.groupId);
  if (event === 'command') {
    applyCommand(line, body);
    return;
  }
  if (!line || line.ended) return;
  if (event === 'admin') {
    line.setAdmin(body);
    reportState();
  } else if (event === 'call') {
    line.showCall(body.from ?? 'someone');
    navigator.vibrate?.([120, 80, 120]);
  }
}

// ---------------------------------------------------------------------------------------------
// Remote control: a control surface holding this panel's key (`/api/panel/{key}`) works its
// keys; control sends each command down the session's event stream, the panel applies it as if
// pressed on screen and reports its state back (`POST /api/session/state`, with the command's
// id), which is what the surface reads.

const nextSwitch = (state, on) => (state === 'toggle' ? !on : state === 'on');

function applyCommand(line, command) {
  if (line && !line.ended) {
    if (command.talk && line.canTalk) {
      const on = line.talk !== 'off';
      if (command.talk === 'off') {
        if (on) line.setTalk('off');
        if (command.reason) line.showReleased(command.reason);
      } else if (!line.admin) {
        // `on` holds the key for the surface (a key already on stays as it is: a latch is not
        // turned into a hold its surface's silence would release); `toggle` latches it or lets it go.
        const next = command.talk === 'on' ? (on ? line.talk : 'remote') : on ? 'off' : 'latched';
        if (next !== line.talk) line.setTalk(next);
      }
    }
    if (command.listen && line.info.listen) {
      line.listenOn = nextSwitch(command.listen, line.listenOn);
      saveLineSettings();
      line.applyListen();
    }
    if (Number.isInteger(command.volume)) {
      line.volume = Math.max(0, Math.min(100, command.volume));
      const slider = line.q('[data-action="volume"]');
      slider.value = String(line.volume);
      slider.setAttribute('aria-valuetext', `${line.volume} %`);
      saveLineSettings();
      line.applyListen();
    }
  }
  root.dataset.remoteApplied = String(Number(root.dataset.remoteApplied ?? 0) + 1);
  reportState(command.id);
}

const reporting = { busy: false, again: false, acks: [] };

/**
 * Reports the panel's state to control: at once for a command (`ack`: its id), otherwise
 * after the report in flight, so that a burst of changes costs two requests.
 */
async function reportState(ack) {
  if (ack !== undefined) reporting.acks.push(ack);
  const token = session.token?.token;
  if (!token || !session.events) return;
  if (reporting.busy) {
    reporting.again = true;
    return;
  }
  reporting.busy = true;
  try {
    do {
      reporting.again = false;
      const acks = reporting.acks.splice(0);
      const lines = session.lines.filter((line) => !line.ended).map((line) => line.report());
      const send = (id) => api('/session/state', { method: 'POST', body: JSON.stringify({ token, lines, ...(id === undefined ? {} : { ack: id }) }) });
      // Each acknowledged command gets its own report (a report acknowledges one).
      await Promise.all(acks.length ? acks.map(send) : [send()]);
    } while (reporting.again || reporting.acks.length);
  } catch {
    // The session ended or control is away: the next change reports again.
  } finally {
    reporting.busy = false;
  }
}

function showRemote() {
  const url = session.token?.panelUrl;
  ui.remote.hidden = !url;
  if (!url) return;
  ui.remoteLink.href = url;
  ui.remoteLink.textContent = url;
  drawQr(ui.remoteQr, url);
  // Without TLS there is no certificate to pin.
  const sha256 = session.token.certificateSha256;
  ui.remoteCertificate.hidden = !sha256;
  ui.remoteSha256.textContent = sha256 ?? '';
}

// ---------------------------------------------------------------------------------------------
// Screen Wake Lock while connected: a phone in a pocket keeps the panel alive.

async function holdWakeLock() {
  if (!('wakeLock' in navigator) || session.wakeLock || document.visibilityState !== 'visible') return;
  try {
    session.wakeLock = await navigator.wakeLock.request('screen');
    session.wakeLock.addEventListener('release', () => { session.wakeLock = null; });
  } catch {
    // refused (battery saver, no permission): the panel works, the screen may sleep
  }
}

function dropWakeLock() {
  session.wakeLock?.release().catch(() => {});
  session.wakeLock = null;
}

// The device says its network is back: a rejoin waiting out its backoff goes now.
window.addEventListener('online', () => {
  if (root.dataset.state !== 'reconnecting' || !session.retryTimer) return;
  clearTimeout(session.retryTimer);
  session.retryTimer = null;
  join();
});

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && root.dataset.state === 'connected') holdWakeLock();
});

// ---------------------------------------------------------------------------------------------
// The page's state machine: idle → joining → connected ⇄ reconnecting; kicked and error end it.

function setState(state, text) {
  const was = root.dataset.state;
  root.dataset.state = state;
  ui.status.textContent = text;
  const inCall = state !== 'idle';
  ui.joinView.hidden = inCall;
  ui.callView.hidden = !inCall;
  ui.who.hidden = !inCall;
  for (const line of session.lines) line.q('[data-action="talk"]').disabled = state !== 'connected' || line.ended;
  if (state !== 'connected' && was === 'connected') releaseHeld();
  if (state === 'connected') holdWakeLock();
  else if (state !== 'reconnecting') dropWakeLock();
  const over = state === 'kicked' || state === 'error';
  if (over) for (const line of session.lines) if (line.talk !== 'off') line.setTalk('off');
  ui.leave.textContent = over ? 'Back' : 'Leave';
  ui.rejoin.hidden = !over;
}

function showMessage(text, isError = true) {
  ui.message.hidden = !text;
  ui.message.textContent = text ?? '';
  ui.message.classList.toggle('error', isError);
}

function connectedText() {
  const live = session.lines.filter((line) => !line.ended);
  return live.length === 1 ? `Connected to ${live[0].info.name}` : `Connected to ${live.length} lines`;
}

/**
 * What POST /api/token is asked for: the user's choice, less the lines the admin took away (as
 * listen and talk lists of the lines the last token had).
 */
function tokenRequest() {
  if (session.ended.size === 0 || !session.token) return session.request;
  const kept = linesOf(session.token).filter((line) => !session.ended.has(line.groupId));
  return {
    listen: kept.filter((line) => line.listen).map((line) => line.groupId),
    talk: kept.filter((line) => line.talk).map((line) => line.groupId),
  };
}

/** A rejoin keeps the panel key (its remote control's link) when control still allows it. */
function resumeRequest() {
  const previous = session.token;
  return previous?.panelKey ? { resume: { token: previous.token, panelKey: previous.panelKey } } : {};
}

async function join() {
  clearTimeout(session.retryTimer);
  const reconnecting = session.attempt > 0;
  setState(reconnecting ? 'reconnecting' : 'joining', reconnecting ? 'Rejoining every line…' : `Joining ${session.label}…`);
  try {
    await initJanus();
    const answer = await api('/token', {
      method: 'POST',
      body: JSON.stringify({ username: session.username, ...tokenRequest(), ...(session.pin ? { pin: session.pin } : {}), ...resumeRequest() }),
    });
    session.token = answer;
    setLines(linesOf(answer));
    showRemote();
    if (session.lines.some((line) => line.canTalk)) await openMicrophone();
    const talking = new Set(session.lines.filter((line) => line.talk === 'latched').map((line) => line.groupId));
    const connection = new Connection(
      { ...answer, lines: session.lines.filter((line) => !line.ended).map((line) => line.info) },
      session.username,
      session.microphone,
      talking,
      connectionEvents,
    );
    session.connection = connection;
    session.netDown.clear();
    await connection.start();
  } catch (error) {
    onJoinFailed(error);
  }
}

async function openMicrophone() {
  if (session.microphone?.readyState === 'live') return;
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
  } catch (error) {
    throw new Error(microphoneProblem(error));
  }
  session.microphone = stream.getAudioTracks()[0];
  session.micSource?.disconnect();
  const ctx = audioContext();
  session.micSource = ctx.createMediaStreamSource(stream);
  session.micMeter.tap(session.micSource);
  showMicMuted();
}

function closeMicrophone() {
  session.micMeter.untap();
  session.micSource?.disconnect();
  session.micSource = null;
  session.microphone?.stop();
  session.microphone = null;
  delete root.dataset.levelOut;
  drawMeter(ui.meterOut, null, null);
}

const connectionEvents = {
  onConnected() {
    session.attempt = 0;
    showMessage(null);
    setState('connected', connectedText());
    if (session.token?.token) followEvents(session.token.token);
  },
  onLost(reason) {
    scheduleReconnect(reason);
  },
  onKicked() {
    endWith('kicked', 'Disconnected by the admin', KICKED_DETAIL);
  },
  onNetwork(groupId, ok) {
    if (ok) session.netDown.delete(groupId);
    else session.netDown.add(groupId);
    const state = root.dataset.state;
    if (!ok && state === 'connected') {
      setState('reconnecting', 'Network lost: waiting for it to come back…');
      showMessage(`No audio path to the server on ${lineById(groupId)?.info.name ?? groupId}.`, false);
    } else if (ok && session.netDown.size === 0 && state === 'reconnecting' && session.connection && !session.retryTimer) {
      showMessage(null);
      setState('connected', connectedText());
    }
  },
  onRemoteStream(groupId, stream) {
    lineById(groupId)?.output.attach(stream);
  },
  onPeople(groupId, people) {
    lineById(groupId)?.setPeople(people);
  },
  onLineEnded(groupId) {
    const line = lineById(groupId);
    session.ended.add(groupId);
    session.netDown.delete(groupId);
    line?.end();
    showMicMuted();
    if (root.dataset.state === 'connected') setState('connected', connectedText());
  },
};

function onJoinFailed(error) {
  session.connection?.close();
  session.connection = null;
  if (error instanceof KickedError) {
    endWith('kicked', error.message, KICKED_DETAIL);
  } else if (error instanceof HttpError && error.status === 401 && /pin/.test(error.code ?? '')) {
    askPin(error);
  } else if (error instanceof HttpError && error.status === 429) {
    backToForm(`Too many tries: wait a minute, then join again. (${error.message})`);
  } else if (error instanceof HttpError && error.status >= 400 && error.status < 500) {
    // The server refuses this name or line (e.g. the group was deleted): retrying won't help.
    endWith('error', error.message);
  } else if (session.attempt > 0) {
    scheduleReconnect(error.message);
  } else {
    endWith('error', `Could not join: ${error.message}`);
  }
}

function scheduleReconnect(reason) {
  session.events?.abort();
  session.connection?.close();
  session.connection = null;
  for (const line of session.lines) line.disconnect();
  const delay = session.attempt === 0 ? 0 : BACKOFF_MS[Math.min(session.attempt - 1, BACKOFF_MS.length - 1)];
  session.attempt += 1;
  // ±20 % jitter, so that a room full of phones does not come back in lockstep.
  const wait = Math.round(delay * (0.8 + Math.random() * 0.4));
  setState('reconnecting', wait > 0 ? `Connection lost. Rejoining in ${Math.ceil(wait / 1000)} s…` : 'Connection lost. Rejoining…');
  showMessage(reason, false);
  session.retryTimer = setTimeout(() => {
    session.retryTimer = null;
    join();
  }, wait);
}

function stopSession() {
  clearTimeout(session.retryTimer);
  session.retryTimer = null;
  session.events?.abort();
  session.events = null;
  session.connection?.close();
  session.connection = null;
  session.attempt = 0;
  for (const line of session.lines) line.disconnect();
}

function endWith(state, text, detail = text) {
  stopSession();
  closeMicrophone();
  setState(state, text);
  showMessage(detail, true);
}

function leave() {
  stopSession();
  closeMicrophone();
  for (const line of session.lines) line.destroy();
  session.lines = [];
  session.ended.clear();
  session.token = null;
  showRemote();
  showMessage(null);
  setState('idle', 'Not connected');
  ui.username.focus();
}

function backToForm(text) {
  leave();
  showJoinError(text);
}

function askPin(error) {
  const wrong = error.code === 'wrong_pin';
  backToForm(wrong ? 'Wrong PIN: try again.' : `${session.label} needs a PIN.`);
  ui.pinField.hidden = false;
  ui.pin.value = '';
  ui.pin.focus();
}

setInterval(() => {
  const mic = session.micMeter.read();
  if (mic === null) delete root.dataset.levelOut;
  else root.dataset.levelOut = mic.toFixed(1);
  if (mic !== null) drawMeter(ui.meterOut, null, mic);
  for (const line of session.lines) line.meter();
}, METER_INTERVAL_MS);

// ---------------------------------------------------------------------------------------------
// The join form: a position or a group from the lists, or a preset from the address
// (`/?position=ID`, `/?groups=a,b&talk=a`).

let positionsById = new Map();
const preset = readPreset();

function readPreset() {
  const params = new URLSearchParams(location.search);
  const position = params.get('position');
  if (position) return { position };
  const list = (name) => (params.get(name) ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const groups = list('groups');
  if (groups.length === 0) return null;
  const talk = params.has('talk') ? list('talk').filter((id) => groups.includes(id)) : groups;
  return { listen: groups, talk };
}

async function loadChoices() {
  ui.group.disabled = true;
  ui.join.disabled = true;
  try {
    const [groups, positions] = await Promise.all([
      api('/groups').then((body) => body.groups),
      optional('/positions').then((body) => body?.positions ?? []),
    ]);
    groupsById = new Map(groups.map((group) => [group.id, group]));
    positionsById = new Map(positions.map((position) => [position.id, position]));
    const saved = JSON.parse(localStorage.getItem(FORM_KEY) ?? '{}');
    ui.username.value ||= saved.username ?? '';
    if (preset) {
      showPreset();
    } else {
      fillPicker(groups, positions, saved.choice ?? saved.groupId);
      if (groups.length === 0 && positions.length === 0) return;
    }
    ui.join.disabled = false;
    showJoinError(null);
  } catch (error) {
    ui.group.replaceChildren(new Option('Groups unavailable', ''));
    showJoinError(`Cannot load the groups: ${error.message}. Retrying…`);
    setTimeout(loadChoices, 3_000);
  }
}

function fillPicker(groups, positions, selected) {
  const options = (list, prefix) =>
    list.map((item) => new Option(item.pin ? `${item.name} 🔒` : item.name, prefix + item.id, false, prefix + item.id === selected));
  if (positions.length > 0) {
    ui.groupLabel.textContent = 'Position or group';
    const byPosition = document.createElement('optgroup');
    byPosition.label = 'Positions';
    byPosition.append(...options(positions, 'position:'));
    const byGroup = document.createElement('optgroup');
    byGroup.label = 'One group';
    byGroup.append(...options(groups, ''));
    ui.group.replaceChildren(byPosition, byGroup);
  } else {
    ui.groupLabel.textContent = 'Group';
    ui.group.replaceChildren(...options(groups, ''));
    if (groups.length === 0) {
      ui.group.append(new Option('No groups yet: ask the admin', ''));
      return;
    }
  }
  ui.group.disabled = false;
  showPinField();
}

function showPreset() {
  ui.groupField.hidden = true;
  ui.preset.hidden = false;
  if (preset.position) {
    const position = positionsById.get(preset.position);
    ui.preset.textContent = `Position: ${position?.name ?? preset.position}`;
    ui.pinField.hidden = !position?.pin;
    return;
  }
  const name = (id) => groupsById.get(id)?.name ?? id;
  const talkOnly = preset.listen.filter((id) => !preset.talk.includes(id));
  ui.preset.textContent = `Lines: ${preset.listen.map(name).join(', ')}${talkOnly.length ? ` (listen only: ${talkOnly.map(name).join(', ')})` : ''}`;
  ui.pinField.hidden = !preset.listen.some((id) => groupsById.get(id)?.pin);
}

function showPinField() {
  const value = ui.group.value;
  const item = value.startsWith('position:') ? positionsById.get(value.slice(9)) : groupsById.get(value);
  ui.pinField.hidden = !item?.pin;
}

/** What POST /api/token is asked for (without the name), and a label for it. */
function chosenRequest() {
  if (preset?.position) {
    return { request: { position: preset.position }, label: positionsById.get(preset.position)?.name ?? preset.position };
  }
  if (preset) {
    const [only] = preset.listen;
    const label = preset.listen.map((id) => groupsById.get(id)?.name ?? id).join(', ');
    // One line to talk and listen on is the one-group form every control knows.
    if (preset.listen.length === 1 && preset.talk.length === 1) return { request: { groupId: only }, label };
    return { request: { listen: preset.listen, talk: preset.talk }, label };
  }
  const value = ui.group.value;
  if (!value) return null;
  if (value.startsWith('position:')) {
    const id = value.slice(9);
    return { request: { position: id }, label: positionsById.get(id)?.name ?? id };
  }
  return { request: { groupId: value }, label: groupsById.get(value)?.name ?? value };
}

function showJoinError(text) {
  ui.joinError.hidden = !text;
  ui.joinError.textContent = text ?? '';
}

function onSubmit(event) {
  event.preventDefault();
  const username = ui.username.value.trim();
  if (username.length < 1 || username.length > 64) {
    showJoinError('Type a name of 1 to 64 characters.');
    ui.username.focus();
    return;
  }
  const chosen = chosenRequest();
  if (!chosen) {
    showJoinError('Pick a group.');
    return;
  }
  showJoinError(null);
  try {
    localStorage.setItem(FORM_KEY, JSON.stringify({ username, choice: preset ? undefined : ui.group.value }));
  } catch {
    // not remembered
  }
  audioContext(); // inside the click: unlocks audio output on mobile browsers too
  session.username = username;
  session.request = chosen.request;
  session.label = chosen.label;
  session.pin = ui.pinField.hidden ? '' : ui.pin.value;
  session.attempt = 0;
  ui.callName.textContent = username;
  showMessage(null);
  join();
}

function init() {
  initTheme(ui.theme);
  initKeys();
  ui.form.addEventListener('submit', onSubmit);
  ui.group.addEventListener('change', showPinField);
  ui.leave.addEventListener('click', () => {
    leave();
    loadChoices();
  });
  ui.rejoin.addEventListener('click', () => {
    // Joining again after a kick asks for every line of the choice again.
    session.ended.clear();
    for (const line of session.lines.filter((l) => l.ended)) line.destroy();
    session.lines = session.lines.filter((l) => !l.ended);
    session.attempt = 0;
    showMessage(null);
    join();
  });
  setState('idle', 'Not connected');
  loadChoices();
}

init();

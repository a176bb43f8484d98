// The join page: pick a group, type a name, join its AudioBridge room through Janus, talk with
// push-to-talk. Plain ES module, no build step; Janus's library is served by control.
//
// Observable state, for people and for browser tests alike (no test-only code paths):
//   <html data-state="idle|joining|connected|reconnecting|kicked|error">
//   <html data-level-out="-23.4">  dBFS of the microphone (what is sent while talking)
//   <html data-level-in="-31.0">   dBFS of what the room sends back
// Each is what its meter shows: the RMS of the last 2048 samples, rising at once and falling
// 30 dB/s. They are absent while there is no such stream; digital silence is -100.

import Janus from '/vendor/janus.js';
import { initTheme } from '/common/theme.js';

const PLUGIN = 'janus.plugin.audiobridge';
const SILENCE_DB = -100;
const METER_FLOOR_DB = -60;
const METER_INTERVAL_MS = 50;
const RELEASE_DB_PER_TICK = 1.5;
/** A join that is not connected by then is given up (and retried when reconnecting). */
const JOIN_TIMEOUT_MS = 20_000;
/** ICE "disconnected" often heals by itself; only this long a gap counts as lost. */
const ICE_GRACE_MS = 5_000;
const BACKOFF_MS = [1_000, 2_000, 4_000, 8_000, 15_000];
/** Janus's answer once the admin removed our token. */
const UNAUTHORIZED = /unauthorized request/i;
const KICKED_DETAIL = 'An admin ended your connection. Join again only if you should be on this line.';

const root = document.documentElement;
const $ = (id) => document.getElementById(id);
const ui = {
  joinView: $('join-view'),
  form: $('join-form'),
  group: $('group'),
  username: $('username'),
  join: $('join'),
  joinError: $('join-error'),
  callView: $('call-view'),
  callGroup: $('call-group'),
  callName: $('call-name'),
  status: $('status-text'),
  talk: $('talk'),
  talkLabel: document.querySelector('#talk .talk-label'),
  talkHint: $('talk-hint'),
  latch: $('latch'),
  message: $('call-message'),
  leave: $('leave'),
  rejoin: $('rejoin'),
  remoteAudio: $('remote-audio'),
  theme: $('theme'),
};

// ---------------------------------------------------------------------------------------------
// Level meters: an AnalyserNode on a MediaStream, read on a timer (rAF stops in background tabs).

class LevelMeter {
  constructor(element, valueElement, attribute) {
    this.element = element;
    this.valueElement = valueElement;
    this.attribute = attribute;
    this.source = null;
    this.analyser = null;
    this.samples = null;
    this.shown = SILENCE_DB;
  }

  attach(context, stream) {
    this.detach();
    this.source = context.createMediaStreamSource(stream);
    this.analyser = context.createAnalyser();
    this.analyser.fftSize = 2048;
    this.samples = new Float32Array(this.analyser.fftSize);
    this.source.connect(this.analyser);
  }

  detach() {
    this.source?.disconnect();
    this.source = this.analyser = this.samples = null;
    this.shown = SILENCE_DB;
    delete root.dataset[this.attribute];
    this.draw(null);
  }

  /** Measures the RMS level of the last block, moves the meter and publishes it. */
  update() {
    if (!this.analyser) return;
    this.analyser.getFloatTimeDomainData(this.samples);
    let sum = 0;
    for (const sample of this.samples) sum += sample * sample;
    const rms = Math.sqrt(sum / this.samples.length);
    const db = rms > 0 ? Math.max(SILENCE_DB, 20 * Math.log10(rms)) : SILENCE_DB;
    // Fast attack, slow release (30 dB/s), as meters on a desk do: a short word stays readable.
    this.shown = db > this.shown ? db : Math.max(db, this.shown - RELEASE_DB_PER_TICK);
    root.dataset[this.attribute] = this.shown.toFixed(1);
    this.draw(this.shown);
  }

  draw(db) {
    const shown = Math.max(METER_FLOOR_DB, db ?? METER_FLOOR_DB);
    this.element.style.setProperty('--level', ((shown - METER_FLOOR_DB) / -METER_FLOOR_DB).toFixed(3));
    this.element.setAttribute('aria-valuenow', Math.round(shown));
    this.valueElement.textContent = db === null ? '—' : db <= METER_FLOOR_DB ? '< −60 dB' : `${Math.round(db)} dB`;
  }

  setMuted(muted) {
    this.element.toggleAttribute('data-muted', muted);
  }
}

const meterOut = new LevelMeter($('meter-out'), $('meter-out-value'), 'levelOut');
const meterIn = new LevelMeter($('meter-in'), $('meter-in-value'), 'levelIn');
let audioContext = null;

function meters() {
  // Created on the Join click: browsers start an AudioContext only after a user gesture.
  audioContext ??= new AudioContext();
  if (audioContext.state === 'suspended') audioContext.resume();
  return audioContext;
}

setInterval(() => {
  meterOut.update();
  meterIn.update();
}, METER_INTERVAL_MS);

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
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new HttpError(response.status, body.error ?? `${response.status} ${response.statusText}`, body.code);
  }
  return body;
}

const fetchGroups = () => api('/groups').then((body) => body.groups);
const fetchToken = (username, groupId) =>
  api('/token', { method: 'POST', body: JSON.stringify({ username, groupId }) });

// ---------------------------------------------------------------------------------------------
// One Janus connection: a session with one AudioBridge handle, joined to the room. Single use:
// a token is good for one session, so a reconnect makes a new Call with a new token.

let janusReady = null;

function initJanus() {
  janusReady ??= new Promise((resolve, reject) => {
    Janus.init({ debug: ['warn', 'error'], callback: resolve });
    if (!Janus.isWebrtcSupported()) reject(new Error('This browser cannot do WebRTC.'));
  });
  return janusReady;
}

class Call {
  /**
   * @param credentials the answer of POST /api/token
   * @param events { onConnected, onLost(reason), onKicked, onLocalStream, onRemoteStream, onPeople(n) }
   */
  constructor(credentials, username, events) {
    this.credentials = credentials;
    this.username = username;
    this.events = events;
    this.janus = null;
    this.handle = null;
    this.joined = false;
    this.mediaUp = false;
    this.closed = false;
    this.others = new Set();
    this.iceTimer = null;
  }

  /** Resolves once joined with media flowing; rejects on any failure before that. */
  start() {
    return new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
      this.timer = setTimeout(() => this.fail(new Error('Joining took too long.')), JOIN_TIMEOUT_MS);
      this.janus = new Janus({
        server: this.credentials.url,
        token: this.credentials.token,
        iceServers: [], // Janus offers host candidates only; venues have no STUN.
        success: () => this.attach(),
        error: (error) => this.fail(new Error(String(error))),
      });
    });
  }

  attach() {
    this.janus.attach({
      plugin: PLUGIN,
      opaqueId: this.credentials.participantIdentity,
      success: (handle) => {
        this.handle = handle;
        this.offer();
      },
      error: (error) => this.fail(new Error(String(error))),
      onmessage: (message, jsep) => this.onMessage(message, jsep),
      webrtcState: (up) => this.onMedia(up),
      iceState: (state) => this.onIce(state),
      onlocaltrack: (track, on) => on && this.events.onLocalStream(new MediaStream([track])),
      onremotetrack: (track, _mid, on, metadata) => {
        // A "mute" (no packets for a moment) is not an end: keep the stream and its meter.
        if (track.kind !== 'audio' || (!on && metadata?.reason === 'mute')) return;
        this.events.onRemoteStream(on ? new MediaStream([track]) : null);
      },
      ondetached: () => this.fail(new Error('The media server dropped the connection.')),
    });
  }

  offer() {
    const { roomName, participantIdentity, token } = this.credentials;
    this.handle.createOffer({
      tracks: [
        { type: 'audio', capture: { echoCancellation: true, noiseSuppression: true, autoGainControl: true }, recv: true },
      ],
      success: (jsep) => {
        // The room admits only the tokens issued for it: the join carries ours.
        const join = { request: 'join', room: roomName, id: participantIdentity, display: this.username, muted: true, token };
        this.handle.send({ message: join, jsep, error: (error) => this.fail(new Error(String(error))) });
      },
      error: (error) => this.fail(new Error(microphoneProblem(error))),
    });
  }

  onMessage(message, jsep) {
    if (jsep) this.handle.handleRemoteJsep({ jsep });
    const own = this.credentials.participantIdentity;
    // AudioBridge tells every participant who was kicked, the kicked one included.
    if (message.kicked === own || message.kicked_all !== undefined) {
      this.kicked();
      return;
    }
    if (message.error) {
      this.fail(new Error(message.error));
      return;
    }
    if (message.audiobridge === 'joined' && message.id === own) this.joined = true;
    if (message.audiobridge === 'destroyed') {
      this.fail(new Error('The group was closed.'));
      return;
    }
    for (const p of message.participants ?? []) if (p.id !== own) this.others.add(p.id);
    for (const gone of [message.leaving, message.kicked]) this.others.delete(gone);
    this.events.onPeople(this.others.size);
    this.checkConnected();
  }

  onMedia(up) {
    this.mediaUp = up;
    if (up) this.checkConnected();
    else this.fail(new Error('The audio connection was closed.'));
  }

  onIce(state) {
    clearTimeout(this.iceTimer);
    if (state === 'failed') this.fail(new Error('The network path to the media server failed.'));
    if (state === 'disconnected') {
      this.iceTimer = setTimeout(() => this.fail(new Error('The network path to the media server was lost.')), ICE_GRACE_MS);
    }
  }

  checkConnected() {
    if (this.joined && this.mediaUp && this.settle) {
      clearTimeout(this.timer);
      this.settle.resolve();
      this.settle = null;
      this.events.onConnected();
    }
  }

  /** Mutes or unmutes us in the room (AudioBridge `configure`). */
  setMuted(muted) {
    if (!this.joined || this.closed) return;
    this.handle.send({
      message: { request: 'configure', muted },
      error: (error) => this.fail(new Error(String(error))),
    });
  }

  /** Ends the call because of `error`: before connecting, start() rejects; after, it is lost. */
  fail(error) {
    if (this.closed) return;
    // Once the admin removed our token, every request answers "Unauthorized": that is a kick
    // whose event we did not see.
    if (this.joined && UNAUTHORIZED.test(error.message)) {
      this.kicked();
      return;
    }
    this.close();
    if (this.settle) this.settle.reject(error);
    else this.events.onLost(error.message);
  }

  kicked() {
    if (this.closed) return;
    this.close();
    if (this.settle) this.settle.reject(new KickedError());
    else this.events.onKicked();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.iceTimer);
    // Destroying the session hangs up, stops the microphone and closes the WebSocket; Janus
    // then reports us as left.
    this.janus?.destroy({ cleanupHandles: true, notifyDestroyed: false });
  }
}

class KickedError extends Error {
  constructor() {
    super('Disconnected by the admin');
  }
}

function microphoneProblem(error) {
  const name = error?.name ?? '';
  if (name === 'NotAllowedError') return 'Microphone access was refused: allow it in the browser and join again.';
  if (name === 'NotFoundError') return 'No microphone found.';
  if (!window.isSecureContext) return 'The microphone needs a secure page: open this page over https://.';
  return `Cannot use the microphone: ${error?.message ?? error}`;
}

// ---------------------------------------------------------------------------------------------
// The page's state machine: idle → joining → connected ⇄ reconnecting; kicked and error end it.

const session = {
  username: '',
  group: null, // { id, name }
  call: null,
  attempt: 0,
  retryTimer: null,
  talking: false,
  people: 0,
};

function setState(state, text) {
  root.dataset.state = state;
  ui.status.textContent = text;
  const inCall = state !== 'idle';
  ui.joinView.hidden = inCall;
  ui.callView.hidden = !inCall;
  ui.talk.disabled = state !== 'connected';
  if (state !== 'connected') setTalking(false);
  const over = state === 'kicked' || state === 'error';
  ui.leave.textContent = over ? 'Back' : 'Leave';
  ui.rejoin.hidden = !over;
}

function showMessage(text, isError = true) {
  ui.message.hidden = !text;
  ui.message.textContent = text ?? '';
  ui.message.classList.toggle('error', isError);
}

function connectedText() {
  const others = session.people;
  return others === 0 ? 'Connected. Nobody else on the line yet.' : `Connected. ${others} more on the line.`;
}

async function join() {
  clearTimeout(session.retryTimer);
  const reconnecting = session.attempt > 0;
  setState(reconnecting ? 'reconnecting' : 'joining', reconnecting ? 'Reconnecting…' : `Joining ${session.group.name}…`);
  try {
    await initJanus();
    const credentials = await fetchToken(session.username, session.group.id);
    const call = new Call(credentials, session.username, callEvents);
    session.call = call;
    await call.start();
  } catch (error) {
    onJoinFailed(error);
  }
}

const callEvents = {
  onConnected() {
    session.attempt = 0;
    showMessage(null);
    setState('connected', connectedText());
  },
  onLost(reason) {
    scheduleReconnect(reason);
  },
  onKicked() {
    endWith('kicked', 'Disconnected by the admin', KICKED_DETAIL);
  },
  onLocalStream(stream) {
    meterOut.attach(meters(), stream);
    meterOut.setMuted(!session.talking);
  },
  onRemoteStream(stream) {
    // Chrome feeds a remote WebRTC stream to WebAudio only while a media element plays it.
    ui.remoteAudio.srcObject = stream;
    if (stream) {
      ui.remoteAudio.play().catch(() => {});
      meterIn.attach(meters(), stream);
    } else {
      meterIn.detach();
    }
  },
  onPeople(count) {
    session.people = count;
    if (root.dataset.state === 'connected') ui.status.textContent = connectedText();
  },
};

function onJoinFailed(error) {
  session.call = null;
  if (error instanceof KickedError) {
    endWith('kicked', error.message, KICKED_DETAIL);
  } else if (error instanceof HttpError && error.status >= 400 && error.status < 500) {
    // The server refuses this name or group (e.g. the group was deleted): retrying won't help.
    endWith('error', error.message);
  } else if (session.attempt > 0) {
    scheduleReconnect(error.message);
  } else {
    endWith('error', `Could not join: ${error.message}`);
  }
}

function scheduleReconnect(reason) {
  stopMedia();
  const delay = BACKOFF_MS[Math.min(session.attempt, BACKOFF_MS.length - 1)];
  session.attempt += 1;
  // ±20 % jitter, so that a room full of phones does not come back in lockstep.
  const wait = Math.round(delay * (0.8 + Math.random() * 0.4));
  setState('reconnecting', `Connection lost. Reconnecting in ${Math.ceil(wait / 1000)} s…`);
  showMessage(reason, false);
  session.retryTimer = setTimeout(join, wait);
}

function endWith(state, text, detail = text) {
  clearTimeout(session.retryTimer);
  session.call?.close();
  session.call = null;
  session.attempt = 0;
  stopMedia();
  setState(state, text);
  showMessage(detail, true);
}

function stopMedia() {
  meterOut.detach();
  meterIn.detach();
  ui.remoteAudio.srcObject = null;
}

function leave() {
  clearTimeout(session.retryTimer);
  session.call?.close();
  session.call = null;
  session.attempt = 0;
  stopMedia();
  showMessage(null);
  setState('idle', 'Not connected');
  ui.username.focus();
}

// ---------------------------------------------------------------------------------------------
// Push-to-talk: hold the button or the space bar; with "latch", each press toggles.

function setTalking(on) {
  if (session.talking === on) return;
  session.talking = on;
  ui.talk.setAttribute('aria-pressed', String(on));
  ui.talkLabel.textContent = on ? 'Talking' : ui.latch.checked ? 'Press to talk' : 'Hold to talk';
  meterOut.setMuted(!on);
  session.call?.setMuted(!on);
}

function press() {
  if (ui.talk.disabled) return;
  setTalking(ui.latch.checked ? !session.talking : true);
}

function release() {
  if (!ui.latch.checked) setTalking(false);
}

/** Space talks unless the user is typing or working a form control. */
function spaceIsOurs(event) {
  return event.code === 'Space' && !event.target.closest?.('input, select, textarea') && !ui.callView.hidden;
}

function initPushToTalk() {
  ui.talk.addEventListener('pointerdown', (event) => {
    if (event.button !== 0) return;
    // Keep receiving pointerup even if the finger slides off the button.
    ui.talk.setPointerCapture(event.pointerId);
    press();
  });
  ui.talk.addEventListener('pointerup', release);
  ui.talk.addEventListener('pointercancel', release);
  ui.talk.addEventListener('contextmenu', (event) => event.preventDefault());
  // Enter on the focused button (a keyboard "click" without a pointer) toggles in latch mode.
  ui.talk.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.repeat && ui.latch.checked) press();
  });
  document.addEventListener('keydown', (event) => {
    if (!spaceIsOurs(event)) return;
    event.preventDefault(); // no page scroll, no button activation
    if (!event.repeat) press();
  });
  document.addEventListener('keyup', (event) => {
    if (!spaceIsOurs(event)) return;
    event.preventDefault();
    release();
  });
  // A key or pointer released while the window was not focused is never reported.
  window.addEventListener('blur', release);
  ui.latch.addEventListener('change', () => {
    setTalking(false);
    ui.talkLabel.textContent = ui.latch.checked ? 'Press to talk' : 'Hold to talk';
    ui.talkHint.textContent = ui.latch.checked
      ? 'Press the button or the space bar to talk, again to stop.'
      : 'Hold the button or the space bar. Muted otherwise.';
  });
}

// ---------------------------------------------------------------------------------------------
// The join form.

const FORM_KEY = 'partyline.join';

async function loadGroups() {
  ui.group.disabled = true;
  ui.join.disabled = true;
  try {
    const groups = await fetchGroups();
    const saved = JSON.parse(localStorage.getItem(FORM_KEY) ?? '{}');
    ui.group.replaceChildren(
      ...groups.map((group) => new Option(group.name, group.id, false, group.id === saved.groupId)),
    );
    if (groups.length === 0) {
      ui.group.append(new Option('No groups yet: ask the admin', ''));
      return;
    }
    ui.username.value ||= saved.username ?? '';
    ui.group.disabled = false;
    ui.join.disabled = false;
    showJoinError(null);
  } catch (error) {
    ui.group.replaceChildren(new Option('Groups unavailable', ''));
    showJoinError(`Cannot load the groups: ${error.message}. Retrying…`);
    setTimeout(loadGroups, 3_000);
  }
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
  const option = ui.group.selectedOptions[0];
  if (!option?.value) {
    showJoinError('Pick a group.');
    return;
  }
  showJoinError(null);
  localStorage.setItem(FORM_KEY, JSON.stringify({ username, groupId: option.value }));
  meters(); // inside the click: unlocks audio output on mobile browsers too
  session.username = username;
  session.group = { id: option.value, name: option.textContent };
  session.attempt = 0;
  session.people = 0;
  ui.callGroup.textContent = session.group.name;
  ui.callName.textContent = username;
  showMessage(null);
  join();
}

function init() {
  initTheme(ui.theme);
  initPushToTalk();
  ui.form.addEventListener('submit', onSubmit);
  ui.leave.addEventListener('click', () => {
    leave();
    loadGroups();
  });
  ui.rejoin.addEventListener('click', () => {
    session.attempt = 0;
    showMessage(null);
    join();
  });
  setState('idle', 'Not connected');
  loadGroups();
}

init();

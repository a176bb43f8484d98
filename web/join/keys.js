// Talk keys: press-and-hold talks while held; a tap (< 300 ms) latches, a second tap releases.
// While no key is on, the page is muted in every room (AudioBridge `configure`) and sends
// silence (each line's clone of the microphone is disabled). The keyboard works them too:
// `1`–`9` lines 1–9, space the first line with a talk key, `A` the announce key.
//
// The announce key (the token's `announce`, a position's) presses every talk key the admin does
// not hold at once, with the same hold and latch; it is on while all of them talk, and a press
// then lets them all go.

import { session } from '/join/session.js';
import { root, ui } from '/join/ui.js';

/** A press shorter than this is a tap: it latches the talk key (a second tap releases it). */
const TAP_MS = 300;

export function pressTalk(line, source) {
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

export function releaseTalk(line, source) {
  const pressed = line.pressed;
  if (!pressed || pressed.source !== source) return;
  line.pressed = null;
  // Released meanwhile (the network went away): nothing left to do.
  if (pressed.ignore || line.talk !== 'momentary') return;
  line.setTalk(performance.now() - pressed.at < TAP_MS ? 'latched' : 'off');
}

/** The talk keys an announce presses: every live talk line the admin does not hold. */
const announceLines = () => session.lines.filter((line) => line.canTalk && !line.ended && !line.admin);
/** The press of the announce key in progress: its source, and the lines it pressed. */
let announcing = null;

export function pressAnnounce(source) {
  if (!session.token?.announce || root.dataset.state !== 'connected' || announcing) return;
  const lines = announceLines();
  const allOn = lines.length > 0 && lines.every((line) => line.talk !== 'off');
  // All on: this press lets every one go (a second tap); otherwise it adds the silent ones.
  const pressed = allOn ? lines : lines.filter((line) => line.talk === 'off');
  announcing = { source, lines: pressed };
  for (const line of pressed) pressTalk(line, 'announce');
}

export function releaseAnnounce(source) {
  if (announcing?.source !== source) return;
  for (const line of announcing.lines) releaseTalk(line, 'announce');
  announcing = null;
}

/**
 * The announce key: shown when the token gives one, on while every line it talks on talks
 * (`data-talk` as a line's).
 */
export function showAnnounce() {
  ui.announce.hidden = !session.token?.announce;
  ui.announceHint.hidden = ui.announce.hidden;
  if (ui.announce.hidden) return;
  const lines = announceLines();
  const states = new Set(lines.map((line) => line.talk));
  const state = lines.length === 0 || states.has('off') ? 'off' : states.size === 1 ? [...states][0] : 'latched';
  ui.announce.dataset.talk = state;
  ui.announce.setAttribute('aria-pressed', String(state !== 'off'));
  ui.announce.querySelector('.talk-label').textContent = state === 'off' ? 'Announce' : 'Announcing';
}

/** Every held key lets go (a latched one stays): network loss, the window losing focus. */
function releaseMomentary() {
  announcing = null;
  for (const line of session.lines) {
    if (line.pressed && !line.pressed.ignore) line.pressed.ignore = true;
    if (line.talk === 'momentary') line.setTalk('off');
  }
}

/** The connection went away: a key held by the remote control lets go too (its key ends). */
export function releaseHeld() {
  releaseMomentary();
  for (const line of session.lines) if (line.talk === 'remote') line.setTalk('off');
}

export function showMicMuted() {
  ui.meterOut.toggleAttribute('data-muted', !session.lines.some((line) => line.talk !== 'off'));
}

/** The line a key talks on: `1`–`9` lines 1–9, space the first line with a talk key. */
function keyLine(event) {
  if (ui.callView.hidden || event.ctrlKey || event.metaKey || event.altKey) return null;
  if (event.target.closest?.('input:not([type="range"]), select, textarea')) return null;
  if (event.code === 'Space') return { line: session.lines.find((line) => line.canTalk), source: 'space' };
  if (event.code === 'KeyA') return { announce: true, source: 'keyA' };
  const digit = /^Digit([1-9])$/.exec(event.code) ?? /^Numpad([1-9])$/.exec(event.code);
  if (!digit) return null;
  return { line: session.lines[Number(digit[1]) - 1], source: `key${digit[1]}` };
}

export function initKeys() {
  document.addEventListener('keydown', (event) => {
    const key = keyLine(event);
    if (!key) return;
    event.preventDefault(); // no page scroll, no button activation, no slider step
    if (event.repeat) return;
    if (key.announce) pressAnnounce(key.source);
    else if (key.line) pressTalk(key.line, key.source);
  });
  document.addEventListener('keyup', (event) => {
    const key = keyLine(event);
    if (!key) return;
    event.preventDefault();
    if (key.announce) releaseAnnounce(key.source);
    else if (key.line) releaseTalk(key.line, key.source);
  });
  bindAnnounceKey();
  // A key or pointer released while the window was not focused is never reported.
  window.addEventListener('blur', releaseMomentary);
}

/** The announce key on screen: pointer and Enter, as a line's talk key. */
function bindAnnounceKey() {
  const key = ui.announce;
  key.addEventListener('pointerdown', (event) => {
    if (event.button !== 0) return;
    key.setPointerCapture(event.pointerId);
    pressAnnounce('pointer');
  });
  key.addEventListener('pointerup', () => releaseAnnounce('pointer'));
  key.addEventListener('pointercancel', () => releaseAnnounce('pointer'));
  key.addEventListener('contextmenu', (event) => event.preventDefault());
  key.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' || event.repeat) return;
    event.preventDefault();
    pressAnnounce('enter');
    releaseAnnounce('enter');
  });
}

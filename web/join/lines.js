// The panel's lines: one card per line (from the page's <template id="line-template">) with its
// listen switch, volume, talk key, call button, activity light and meter, and the line's state,
// kept over reconnects. The card's data-* attributes are the page's observable state (main.js).

import { LineOutput, drawMeter, volumeGain } from '/join/audio.js';
import { sendCall, showCallButtons } from '/join/calls.js';
import { pressTalk, releaseTalk, showAnnounce, showMicMuted } from '/join/keys.js';
import { openMicrophone } from '/join/microphone.js';
import { closeDirect, showPeople } from '/join/people.js';
import { reportState } from '/join/remote.js';
import { groupsById, session } from '/join/session.js';
import { loadLineSettings, saveLineSettings } from '/join/settings.js';
import { showMessage, ui } from '/join/ui.js';

/** How long a call signal flashes a line. */
const CALL_MS = 5_000;
const DEFAULT_VOLUME = 80;

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
    if (info.program) this.el.dataset.program = 'true';
    else delete this.el.dataset.program;
    // A direct line: a private line to one person, named after them.
    if (info.direct) this.el.dataset.direct = name;
    else delete this.el.dataset.direct;
    this.q('.line-direct').hidden = !info.direct;
    // Either end may close it: the callee declines, the caller hangs up.
    const close = this.q('[data-action="close"]');
    close.hidden = !info.direct;
    close.setAttribute('aria-label', `Close the direct line with ${name}`);
    this.q('.line-program').hidden = !info.program;
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
    showAnnounce();
    const message = this.q('.line-admin');
    message.textContent =
      this.admin === 'muted'
        ? `Muted by the admin on ${this.info.name}: your talk key works again once released.`
        : this.admin === 'line-muted'
          ? `The admin muted ${this.info.name}: nobody is heard on it.`
          : '';
    message.hidden = !this.admin;
  }

  /** Control let the talk key go (`reason`): the card says why until the key is used again. */
  showReleased(reason) {
    this.el.dataset.released = reason;
    const message = this.q('.line-released');
    message.textContent =
      reason === 'surface-silent'
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
    this.q('[data-action="close"]').addEventListener('click', () => closeDirect(this.groupId));
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
    this.q('.talk-sub').textContent =
      {
        latched: 'latched: tap to stop',
        momentary: 'release to stop',
        remote: 'by remote control: tap to stop',
      }[state] ?? 'hold or tap to latch';
    session.connection?.setTalking(this.groupId, state !== 'off');
    showMicMuted();
    showAnnounce();
    if (this.info.direct) showPeople();
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
      dimmed: this.el.dataset.dimmed === 'true',
    };
  }

  /** Who is on the line and who has a talk key on: AudioBridge's participant lists. */
  /** The link's judgement (good, degraded, poor) and the figures it was made of. */
  setLink(quality, figures) {
    this.el.dataset.link = quality;
    const bars = this.q('.line-link');
    const rtt = Number.isFinite(figures?.rttMs) ? `, ${Math.round(figures.rttMs)} ms round trip` : '';
    const text = figures
      ? `${figures.lossPercent.toFixed(1)} % lost, ${Math.round(figures.jitterMs)} ms jitter${rtt}`
      : '';
    bars.hidden = false;
    bars.title = `Link ${quality}: ${text}`;
    bars.setAttribute('aria-label', `Link to ${this.info.name}: ${quality}, ${text}`);
    const warning = this.q('.line-link-warning');
    warning.hidden = quality === 'good';
    warning.textContent =
      quality === 'poor'
        ? `Poor link (${text}): words will drop. Move closer to the access point or change network.`
        : `Weak link (${text}): a word may drop now and then.`;
  }

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
    this.heardDb = db;
    if (db === null) delete this.el.dataset.levelIn;
    else this.el.dataset.levelIn = db.toFixed(1);
    drawMeter(this.q('.line-meter'), null, db);
  }

  /** A program line dimmed by `db` (0: not dimmed); a change is reported to control. */
  setDimmed(db) {
    this.output.setDim(db);
    const dimmed = String(db < 0);
    if (this.el.dataset.dimmed === dimmed) return;
    this.el.dataset.dimmed = dimmed;
    reportState();
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

/**
 * The lines of a token answer. Before multi-line tokens control answered `{roomName}` only: one
 * line, listen and talk, named as its group.
 */
export function linesOf(answer) {
  if (Array.isArray(answer.lines) && answer.lines.length > 0) {
    return answer.lines.map((line) => ({
      groupId: line.groupId,
      name: line.name ?? groupsById.get(line.groupId)?.name ?? line.groupId,
      roomName: line.roomName ?? line.groupId,
      listen: line.listen !== false,
      talk: line.talk !== false,
      program: line.program === true,
    }));
  }
  const id = answer.roomName;
  return [{ groupId: id, name: groupsById.get(id)?.name ?? id, roomName: id, listen: true, talk: true }];
}

/**
 * Makes the panel's direct lines be `infos` (people.js): new ones get a card and join their
 * room, closed ones are hung up and their card goes.
 */
export async function setDirectLines(infos) {
  const had = session.lines.filter((line) => line.info.direct);
  const groups = session.lines.filter((line) => !line.info.direct && !line.ended).map((line) => line.info);
  if (had.length === infos.length && had.every((line, i) => line.groupId === infos[i].groupId)) return;
  for (const line of had)
    if (!infos.some((info) => info.groupId === line.groupId)) session.connection?.dropLine(line.groupId);
  setLines([...groups, ...infos]);
  const added = infos.filter((info) => !had.some((line) => line.groupId === info.groupId));
  if (added.length === 0) return;
  // A listen-only panel has no microphone yet: a direct line talks.
  const connection = session.connection;
  try {
    await openMicrophone();
  } catch (error) {
    showMessage(error.message);
    return;
  }
  if (!connection || connection !== session.connection) return;
  connection.microphone ??= session.microphone;
  for (const info of added) connection.addLine(info);
}

/** Builds the panel's cards for `infos`, keeping the state of lines that stay. */
export function setLines(infos) {
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

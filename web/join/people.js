// People: the panel's person keys, its direct lines and its reply key, from the session's
// `people` events (control's view: who is online for each key, which direct lines are open,
// whom reply reaches). A person key talks to a person (at a position for many, to everyone at
// it, a direct line each): its first press opens the direct lines (`POST /api/session/direct`),
// which both ends then join as lines of their own (a card marked with the other's name, with a
// Close key: the callee declines, the caller hangs up); from then on it works those lines'
// talk keys, held or latched like any other. The reply key (and `R`) works the talk key of the direct line of whoever last
// spoke to this panel on one or opened one to it.
//
// DOM contract: `#people` (hidden without keys), each person key `button.person` with
// `data-person` (a position id or a participant identity), `data-online` and `data-talk`; the
// reply key `#reply` with `data-talk` and `data-reply-to` (the name it reaches); a direct line's
// card has `data-direct` (the other end's name).

import { HttpError, api } from '/join/api.js';
import { pressTalk, releaseTalk } from '/join/keys.js';
import { lineById, session } from '/join/session.js';
import { showMessage, ui } from '/join/ui.js';

/** A person key's line not joined by then is given up. */
const OPEN_TIMEOUT_MS = 15_000;
/** The people as control last sent them. */
let people = { keys: [], online: [], direct: [], reply: null };
/** Person-key presses waiting for their direct line: key → { source, at, released }. */
const opening = new Map();
/** The person keys' list items, made once per key and updated in place. */
const keyItems = new Map();

/** A session's `people` event. `setDirectLines(infos)` makes the panel's direct lines be `infos`. */
export function applyPeople(body, setDirectLines) {
  people = body;
  setDirectLines(body.direct.map(directInfo));
  for (const [key, press] of opening) startIfOpened(key, press);
  showPeople();
}

/** The line info (as `linesOf` makes them) of a direct line. */
function directInfo(direct) {
  return {
    groupId: direct.groupId,
    name: direct.name,
    roomName: direct.groupId,
    listen: true,
    talk: true,
    program: false,
    direct: { with: direct.with, caller: direct.caller },
  };
}

const keyOf = (person) => person.position ?? person.identity;
const personByKey = (key) => [...people.keys, ...people.online].find((p) => keyOf(p) === key);
/** Whom a key reaches: everyone at a position for many, else one (or nobody). */
const occupantsOf = (person) => person?.occupants ?? (person?.identity ? [person] : []);
/** The direct lines a key talks on: one to each crew member it reaches, those open. */
const linesOf = (person) =>
  occupantsOf(person)
    .map((o) => (o.groupId ? lineById(o.groupId) : null))
    .filter(Boolean);
/** Every one it reaches has a line this panel joined: a press talks at once. */
const allJoined = (person) => {
  const occupants = occupantsOf(person);
  return occupants.length > 0 && occupants.every((o) => o.groupId && lineById(o.groupId)?.joinedOnce);
};

/** A direct line's link joined (connection.js): a press waiting for it talks now. */
export function directJoined(groupId) {
  const line = lineById(groupId);
  if (!line) return;
  line.joinedOnce = true;
  for (const [key, press] of opening) startIfOpened(key, press);
}

/**
 * A waiting press talks once every line it opened (control's answer: `press.rooms`) is joined:
 * held on, it talks until released; tapped, it latches.
 */
function startIfOpened(key, press) {
  const lines = (press.rooms ?? []).map(lineById);
  if (!press.rooms || lines.some((line) => !line?.joinedOnce)) return;
  opening.delete(key);
  for (const line of lines) {
    if (!press.released) pressTalk(line, press.source);
    else if (press.tap) line.setTalk('latched');
  }
}

export function pressPerson(key, source) {
  const person = personByKey(key);
  if (!person || opening.has(key)) return;
  if (allJoined(person)) {
    for (const line of linesOf(person)) pressTalk(line, source);
    return;
  }
  if (occupantsOf(person).length === 0) {
    showMessage(`Nobody is at ${person.name} now.`, false);
    return;
  }
  const press = { source, at: performance.now(), released: false, rooms: null };
  opening.set(key, press);
  showPeople();
  // A line that never joins (its room failed) frees the key again.
  setTimeout(() => {
    if (opening.get(key) !== press) return;
    opening.delete(key);
    showPeople();
    showMessage(`No line to ${person.name} could be opened.`, false);
  }, OPEN_TIMEOUT_MS);
  const to = person.position ? { position: person.position } : { identity: person.identity };
  api('/session/direct', { method: 'POST', body: JSON.stringify({ token: session.token?.token, ...to }) })
    .then((answer) => {
      // Older controls answer one line.
      press.rooms = (answer.lines ?? [answer]).map((line) => line.groupId);
      if (opening.get(key) === press) startIfOpened(key, press);
    })
    .catch((error) => {
      opening.delete(key);
      showPeople();
      showMessage(error instanceof HttpError ? error.message : `Cannot reach ${person.name}: ${error.message}`, false);
    });
}

export function releasePerson(key, source) {
  const press = opening.get(key);
  if (press) {
    // Still opening: remember how it was let go, for when the line is there.
    press.released = true;
    press.tap = performance.now() - press.at < 300;
    return;
  }
  for (const line of linesOf(personByKey(key))) releaseTalk(line, source);
}

/** The Close key of a direct line's card: the callee declines it, the caller hangs up. */
export function closeDirect(groupId) {
  api('/session/direct/close', {
    method: 'POST',
    body: JSON.stringify({ token: session.token?.token, groupId }),
  }).catch((error) => showMessage(`Cannot close the direct line: ${error.message}`, false));
}

const replyLine = () => (people.reply ? lineById(people.reply.groupId) : null);

export function pressReply(source) {
  const line = replyLine();
  if (line) pressTalk(line, source);
}

export function releaseReply(source) {
  const line = replyLine();
  if (line) releaseTalk(line, source);
}

/** Redraws the person keys and the reply key from `people` and the lines' talk states. */
export function showPeople() {
  const all = [...people.keys, ...people.online];
  ui.people.hidden = all.length === 0 && !people.reply && people.direct.length === 0;
  const items = all.map((person) => personKey(person));
  // Moved only when the keys change: a key held down keeps its pointer.
  const current = [...ui.personKeys.children];
  if (items.length !== current.length || items.some((item, i) => item !== current[i])) {
    ui.personKeys.replaceChildren(...items);
  }
  for (const key of keyItems.keys()) if (!all.some((p) => keyOf(p) === key)) keyItems.delete(key);
  const reply = people.reply;
  const line = replyLine();
  ui.reply.hidden = !reply;
  ui.reply.dataset.talk = line?.talk ?? 'off';
  ui.reply.setAttribute('aria-pressed', String((line?.talk ?? 'off') !== 'off'));
  if (reply) ui.reply.dataset.replyTo = reply.name;
  else delete ui.reply.dataset.replyTo;
  ui.reply.querySelector('.talk-sub').textContent = reply ? `to ${reply.name} (R)` : '';
  ui.reply.setAttribute('aria-label', reply ? `Reply to ${reply.name} (key R)` : 'Reply');
}

function personKey(person) {
  const key = keyOf(person);
  let item = keyItems.get(key);
  if (!item) {
    item = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'talk person';
    button.dataset.person = key;
    const label = document.createElement('span');
    label.className = 'talk-label';
    const sub = document.createElement('span');
    sub.className = 'talk-sub';
    button.append(label, sub);
    bindKey(
      button,
      () => pressPerson(key, 'person'),
      () => releasePerson(key, 'person'),
    );
    item.append(button);
    keyItems.set(key, item);
  }
  const button = item.firstElementChild;
  const occupants = occupantsOf(person);
  button.dataset.online = String(occupants.length > 0);
  const line = linesOf(person)[0];
  const talk = opening.has(key) ? 'opening' : (line?.talk ?? 'off');
  button.dataset.talk = talk;
  button.disabled = occupants.length === 0;
  button.setAttribute('aria-pressed', String(talk !== 'off'));
  button.setAttribute('aria-label', `Talk to ${person.name}`);
  button.querySelector('.talk-label').textContent = person.name;
  const who = person.position && occupants.length > 0 ? `${occupants.map((o) => o.who).join(', ')}: ` : '';
  button.querySelector('.talk-sub').textContent =
    occupants.length === 0
      ? 'not online'
      : `${who}${talk === 'opening' ? 'opening a line…' : allJoined(person) ? 'direct line open' : 'hold or tap to latch'}`;
  return item;
}

/** Pointer and Enter on a key, as on a line's talk key. */
export function bindKey(key, press, release) {
  key.addEventListener('pointerdown', (event) => {
    if (event.button !== 0) return;
    key.setPointerCapture(event.pointerId);
    press();
  });
  key.addEventListener('pointerup', release);
  key.addEventListener('pointercancel', release);
  key.addEventListener('contextmenu', (event) => event.preventDefault());
  key.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' || event.repeat) return;
    event.preventDefault();
    press();
    release();
  });
}

/** No session: no people. */
export function clearPeople() {
  people = { keys: [], online: [], direct: [], reply: null };
  opening.clear();
  showPeople();
}

/** The reply key on screen and `R` on the keyboard. */
export function initPeopleKeys() {
  bindKey(
    ui.reply,
    () => pressReply('reply'),
    () => releaseReply('reply'),
  );
  const isReplyKey = (event) =>
    event.code === 'KeyR' &&
    !ui.callView.hidden &&
    !event.ctrlKey &&
    !event.metaKey &&
    !event.altKey &&
    !event.target.closest?.('input:not([type="range"]), select, textarea');
  document.addEventListener('keydown', (event) => {
    if (!isReplyKey(event)) return;
    event.preventDefault();
    if (!event.repeat) pressReply('keyR');
  });
  document.addEventListener('keyup', (event) => {
    if (!isReplyKey(event)) return;
    event.preventDefault();
    releaseReply('keyR');
  });
}

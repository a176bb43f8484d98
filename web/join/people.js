// People: the panel's person keys, its direct lines and its reply key, from the session's
// `people` events (control's view: who is online for each key, which direct lines are open,
// whom reply reaches). A person key talks to one person: its first press opens the direct line
// (`POST /api/session/direct`), which both panels then join as a line of their own (a card
// marked with the other's name); from then on it works that line's talk key, held or latched
// like any other. The reply key (and `R`) works the talk key of the direct line of whoever last
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
  for (const [key, press] of opening) {
    const line = lineOf(personByKey(key));
    if (line?.joinedOnce) startOpened(key, press, line);
  }
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
const lineOf = (person) => (person?.groupId ? lineById(person.groupId) : null);

/** A direct line's link joined (connection.js): a press waiting for it talks now. */
export function directJoined(groupId) {
  const line = lineById(groupId);
  if (!line) return;
  line.joinedOnce = true;
  for (const [key, press] of opening) {
    if (personByKey(key)?.groupId === groupId) startOpened(key, press, line);
  }
}

/** The line a waiting press opened is there: held on, it talks until released; tapped, it latches. */
function startOpened(key, press, line) {
  opening.delete(key);
  if (press.released) {
    if (press.tap) line.setTalk('latched');
    return;
  }
  pressTalk(line, press.source);
}

export function pressPerson(key, source) {
  const person = personByKey(key);
  if (!person || opening.has(key)) return;
  const line = lineOf(person);
  if (line?.joinedOnce) {
    pressTalk(line, source);
    return;
  }
  if (!person.identity) {
    showMessage(`Nobody is at ${person.name} now.`, false);
    return;
  }
  const press = { source, at: performance.now(), released: false };
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
  api('/session/direct', { method: 'POST', body: JSON.stringify({ token: session.token?.token, ...to }) }).catch((error) => {
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
  const line = lineOf(personByKey(key));
  if (line) releaseTalk(line, source);
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
    bindKey(button, () => pressPerson(key, 'person'), () => releasePerson(key, 'person'));
    item.append(button);
    keyItems.set(key, item);
  }
  const button = item.firstElementChild;
  button.dataset.online = String(Boolean(person.identity));
  const line = lineOf(person);
  const talk = opening.has(key) ? 'opening' : line?.talk ?? 'off';
  button.dataset.talk = talk;
  button.disabled = !person.identity;
  button.setAttribute('aria-pressed', String(talk !== 'off'));
  button.setAttribute('aria-label', `Talk to ${person.name}`);
  button.querySelector('.talk-label').textContent = person.name;
  const who = person.position && person.who ? `${person.who}: ` : '';
  button.querySelector('.talk-sub').textContent = !person.identity
    ? 'not online'
    : `${who}${talk === 'opening' ? 'opening a line…' : line ? 'direct line open' : 'hold or tap to latch'}`;
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
  bindKey(ui.reply, () => pressReply('reply'), () => releaseReply('reply'));
  const isReplyKey = (event) => event.code === 'KeyR' && !ui.callView.hidden && !event.ctrlKey && !event.metaKey
    && !event.altKey && !event.target.closest?.('input:not([type="range"]), select, textarea');
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

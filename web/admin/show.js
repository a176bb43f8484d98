// Show tab, the production manager's screen: a grid of the lines (the groups, then the direct
// lines open now) by the crew connected, each cell one member's state on one line (listen and
// talk rights, a light while they talk, the admin's mute, their link's quality), each row the
// member's node. Seeded from `GET /users` and `GET /groups`, then kept live by the admin event
// stream: a talk, a link's change or a move to another node is written into its one cell or
// row as the event comes (live.js hands them over), with no fetch and no re-render; joins,
// leaves, direct lines and config changes make main.js fetch again, and what it fetched is
// written in place (keyed rows and cells, an attribute only where it changed), so a crew of
// 200 costs a few attribute writes per event.
//
// A click on a cell (or Enter, Space) mutes or unmutes that member on that line
// (`POST /users/{identity}/lines/{group}/mute|unmute`); a group's header has two buttons, Call
// (`POST /groups/{id}/call`: every panel on the line flashes "Call from Admin") and Mute or
// Unmute for the whole line (`POST /groups/{id}/mute|unmute`), and flashes for a call on it; a
// direct line's header closes it (`DELETE /direct/{group}`, confirmed in place).
// Filters by name and by line; arrow keys move between cells, `/` goes to the name filter.
// Below 640 px the grid is a list: each member, then only the lines they are on.

import { del, get, post, seg } from '/admin/api.js';
import { h, setAttr, setOptions, setText, showError, syncKeyed } from '/admin/dom.js';
import * as groups from '/admin/groups.js';
import { confirmInPlace, elements, labelButton, load } from '/admin/tab.js';

let ui;
/** The members connected, by identity (`UserView`s of `GET /users`). */
let members = new Map();
/** The columns: `{ id, name, direct, muted }`, the groups in the config's order, then direct lines. */
let lines = [];
/** Who talks where now, as `identity␤groupId`: from the events, seeded by the users list. */
const talking = new Set();
/**
 * While the lights wait for their seed from the users list (`lines[].talking`: the talks under
 * way when the page opened or its event stream came back), the talk keys whose events came
 * since: an event is newer than the list, so the list does not overrule it. `null`: seeded.
 */
let seed = new Set();
/** The cell in the tab order (`identity␤groupId`): arrow keys move it, a refresh keeps it. */
let current = null;
/** Members on a line whose link is poor, counted for the summary. */
let poorLinks = 0;

const MEMBER = '@'; // the key of a row's first cell (the member) and of the corner
/** How long a line's header flashes after a call: as long as `GET /users` says `call`. */
const CALL_MS = 5_000;
const talkKey = (identity, groupId) => `${identity}\n${groupId}`;

export function init() {
  ui = elements({
    panel: 'panel-show',
    grid: 'show-grid',
    head: 'show-lines',
    rows: 'show-rows',
    name: 'show-filter-name',
    line: 'show-filter-line',
    summary: 'show-summary',
    empty: 'show-empty',
    none: 'show-none',
    error: 'show-error',
  });
  ui.name.addEventListener('input', applyFilters);
  ui.line.addEventListener('change', applyFilters);
  ui.rows.addEventListener('click', (event) => {
    const cell = event.target.closest('td.show-cell');
    if (cell) toggleMute(cell);
  });
  ui.grid.addEventListener('keydown', onGridKey);
  // The cell focused (by a click too) is the one in the tab order.
  ui.rows.addEventListener('focusin', (event) => {
    const cell = event.target.closest('td.show-cell');
    if (cell) takeTabOrder(cell);
  });
  document.addEventListener('keydown', onSlash);
}

export function reset() {
  members = new Map();
  lines = [];
  talking.clear();
  seed = new Set();
  current = null;
  ui.rows.replaceChildren();
  syncHeader();
  showError(ui.error, null);
}

export async function refresh() {
  const seeding = seed;
  const loaded = await load(ui.error, 'show', async () => {
    const [body] = await Promise.all([get('/users'), groups.fetchGroups()]);
    members = new Map(body.users.filter((u) => u.state === 'connected').map((u) => [u.identity, u]));
  });
  if (!loaded) return;
  // A seed asked for again meanwhile (a reconnect) waits for a fetch made after it.
  if (seeding && seeding === seed) {
    for (const user of members.values()) {
      for (const line of user.lines ?? []) {
        const key = talkKey(user.identity, line.groupId);
        if (line.talking && !seeding.has(key)) talking.add(key);
      }
    }
    seed = null;
  }
  render();
}

// ---------------------------------------------------------------------------------------------
// Live events, each written into the one cell or row it touches

/** An event of the admin stream (`name` null after a reconnect: talks may have been missed). */
export function onEvent(name, data) {
  if (!ui) return;
  if (name === null || name === 'reset') {
    // What was missed is unknown: the lights start again from the next fetch's users list.
    for (const key of talking) setTalking(...key.split('\n'), false);
    seed = new Set();
    return;
  }
  if (!data) return;
  switch (name) {
    case 'talking':
    case 'stoppedTalking':
      seed?.add(talkKey(data.identity, data.groupId));
      setTalking(data.identity, data.groupId, name === 'talking');
      break;
    case 'linkChanged':
      setLink(data);
      break;
    case 'sessionMoved':
      setNode(data.identity, data.node);
      break;
    case 'call':
      flashCall(data.groupId);
      break;
    case 'userJoined':
    case 'userLeft':
      // The fetch main.js makes on this event adds or removes the member; until it answers, the cell says it.
      setJoined(data.identity, data.groupId, name === 'userJoined');
      if (name === 'userLeft') {
        seed?.add(talkKey(data.identity, data.groupId));
        setTalking(data.identity, data.groupId, false);
      }
      break;
    default:
  }
}

function setTalking(identity, groupId, on) {
  const key = talkKey(identity, groupId);
  if (on === talking.has(key)) return;
  if (on) talking.add(key);
  else talking.delete(key);
  refreshCell(identity, groupId);
  updateLineTalk(groupId);
  summarize();
}

/** A line's link as its panel measured it (`linkChanged`), into the member and its cell. */
function setLink({ identity, groupId, quality, lossPercent, jitterMs, rttMs }) {
  const line = lineOf(members.get(identity), groupId);
  if (!line) return;
  line.link = { quality, lossPercent, jitterMs, rttMs };
  refreshCell(identity, groupId);
  countPoorLinks();
  summarize();
}

function flashCall(groupId) {
  const th = headerOf(groupId);
  if (!th) return;
  th.dataset.call = '';
  clearTimeout(th.callTimer);
  th.callTimer = setTimeout(() => delete th.dataset.call, CALL_MS);
}

function setNode(identity, node) {
  const user = members.get(identity);
  if (!user) return;
  user.node = node;
  const row = rowOf(identity);
  if (!row) return;
  setAttr(row, 'data-node', node);
  updateMember(row.firstElementChild, user);
}

function setJoined(identity, groupId, joined) {
  const line = lineOf(members.get(identity), groupId);
  if (!line) return;
  line.joined = joined;
  refreshCell(identity, groupId);
}

const headerOf = (groupId) => ui.head.querySelector(`th[data-key="${CSS.escape(groupId)}"]`);
const lineOf = (user, groupId) => user?.lines?.find((line) => line.groupId === groupId);
const rowOf = (identity) => ui.rows.querySelector(`tr[data-key="${CSS.escape(identity)}"]`);
const cellIn = (row, groupId) => row?.querySelector(`td[data-key="${CSS.escape(groupId)}"]`);

function refreshCell(identity, groupId) {
  const cell = cellIn(rowOf(identity), groupId);
  const line = lines.find((l) => l.id === groupId);
  if (cell && line) updateCell(cell, members.get(identity), line);
}

// ---------------------------------------------------------------------------------------------
// The grid

/** The columns: every group (an empty line is still a line), then the direct lines open now. */
function lineList() {
  const list = groups.current().map((g) => ({ id: g.id, name: g.name, direct: false, muted: g.muted === true }));
  const direct = new Map();
  for (const user of members.values()) {
    for (const line of user.lines ?? []) {
      if (!line.directWith) continue;
      const ends = direct.get(line.groupId) ?? [];
      direct.set(line.groupId, [...ends, user.username]);
    }
  }
  for (const [id, ends] of direct) {
    list.push({ id, name: ends.sort().join(' ↔ '), direct: true, muted: false });
  }
  return list;
}

/** By name, numbers in names in their order (crew-2 before crew-10); one collator for every comparison. */
const nameCollator = new Intl.Collator(undefined, { numeric: true });
const byName = (a, b) => nameCollator.compare(a.username, b.username) || a.identity.localeCompare(b.identity);

function render() {
  lines = lineList();
  syncHeader();
  const choices = [{ value: '', label: 'All lines' }, ...lines.map((l) => ({ value: l.id, label: l.name }))];
  if (document.activeElement !== ui.line) setOptions(ui.line, choices);
  for (const key of talking) if (!members.has(key.split('\n')[0])) talking.delete(key);
  syncKeyed(ui.rows, [...members.values()].sort(byName), {
    key: (u) => u.identity,
    create: createRow,
    update: updateRow,
  });
  for (const line of lines) updateLineTalk(line.id);
  countPoorLinks();
  applyFilters();
}

function syncHeader() {
  syncKeyed(ui.head, [{ id: MEMBER }, ...lines], {
    key: (line) => line.id,
    create: createLineHeader,
    update: (th, line) => line.id !== MEMBER && updateLineHeader(th, line),
  });
}

function createLineHeader(line) {
  if (line.id === MEMBER) return h('th', { scope: 'col', class: 'show-corner' }, 'Crew');
  const action = h('button', { class: 'ghost small-button sl-action', type: 'button' });
  if (line.direct) confirmInPlace(action, () => closeDirect(line.id));
  else action.addEventListener('click', () => muteLine(line.id));
  let call = null;
  if (!line.direct) {
    call = h('button', { class: 'ghost small-button sl-call', type: 'button' }, 'Call');
    call.addEventListener('click', () => callLine(call, line.id));
  }
  const th = h(
    'th',
    { scope: 'col', class: 'show-line' },
    h('span', { class: 'sl-name' }),
    h('span', { class: 'sl-count muted small' }),
    call,
    action,
  );
  if (line.direct) th.dataset.direct = '';
  return th;
}

function updateLineHeader(th, line) {
  setText(th.querySelector('.sl-name'), line.name);
  const on = [...members.values()].filter((u) => lineOf(u, line.id)?.joined).length;
  setText(th.querySelector('.sl-count'), `${on} joined`);
  setAttr(th, 'data-muted', line.muted ? '' : null);
  const action = th.querySelector('.sl-action');
  if (line.direct) {
    if (action.dataset.confirming === undefined) setText(action, 'Close');
    labelButton(action, `Close the direct line ${line.name}`);
  } else {
    labelButton(th.querySelector('.sl-call'), `Call everyone on ${line.name}`);
    setText(action, line.muted ? 'Unmute' : 'Mute');
    setAttr(action, 'aria-pressed', String(line.muted));
    setAttr(action, 'aria-label', `${line.muted ? 'Unmute' : 'Mute'} the line ${line.name}`);
  }
}

/** A header lights while someone talks on its line. */
function updateLineTalk(groupId) {
  const th = headerOf(groupId);
  if (!th) return;
  const suffix = `\n${groupId}`;
  setAttr(th, 'data-talking', [...talking].some((key) => key.endsWith(suffix)) ? '' : null);
}

function createRow() {
  return h('tr', { class: 'show-row' });
}

function updateRow(row, user) {
  setAttr(row, 'data-node', user.node ?? null);
  syncKeyed(row, [{ id: MEMBER }, ...lines], {
    key: (line) => line.id,
    create: (line) => (line.id === MEMBER ? createMember() : createCell()),
    update: (cell, line) => (line.id === MEMBER ? updateMember(cell, user) : updateCell(cell, user, line)),
  });
}

function createMember() {
  return h(
    'th',
    { scope: 'row', class: 'show-member' },
    h('strong', { class: 'sm-name' }),
    h('span', { class: 'sm-where muted small' }),
  );
}

function updateMember(th, user) {
  setText(th.querySelector('.sm-name'), user.username);
  const kind = user.stream ? `${user.stream.toUpperCase()}` : user.kind === 'server' ? 'sound card' : '';
  const where = [kind, user.node ? `node ${user.node}` : ''].filter(Boolean).join(' · ');
  setText(th.querySelector('.sm-where'), where);
}

function createCell() {
  return h(
    'td',
    { class: 'show-cell', role: 'gridcell', tabindex: '-1' },
    h('span', { class: 'sc-light', 'aria-hidden': 'true' }),
    h('span', { class: 'sc-rights' }),
    h('span', { class: 'sc-link', 'aria-hidden': 'true' }, h('i'), h('i'), h('i')),
    h('span', { class: 'sc-muted' }, 'muted'),
  );
}

/** Listen and talk, in two letters. */
const rightsText = (line) => [line.listen ? 'L' : '', line.talk ? 'T' : ''].filter(Boolean).join(' ') || '–';

function updateCell(cell, user, line) {
  const state = lineOf(user, line.id);
  setAttr(cell, 'data-line-name', line.name);
  setAttr(cell, 'data-on', state ? '' : null);
  const talks = Boolean(state) && talking.has(talkKey(user.identity, line.id));
  setAttr(cell, 'data-talking', talks ? '' : null);
  setAttr(cell, 'data-listen', state ? String(state.listen) : null);
  setAttr(cell, 'data-talk', state ? String(state.talk) : null);
  setAttr(cell, 'data-joined', state ? String(state.joined) : null);
  setAttr(cell, 'data-muted', state?.mutedByAdmin ? '' : null);
  setAttr(cell, 'data-link', state?.link?.quality ?? null);
  setText(cell.querySelector('.sc-rights'), state ? rightsText(state) : '');
  const label = state ? cellLabel(user, line, state, talks) : `${user.username} is not on ${line.name}`;
  setAttr(cell, 'aria-label', label);
  setAttr(cell, 'title', label);
  setAttr(cell, 'aria-disabled', state ? null : 'true');
}

function cellLabel(user, line, state, talks) {
  const rights = [state.listen && 'listens', state.talk && 'talks'].filter(Boolean).join(' and ') || 'no keys';
  const parts = [`${user.username} on ${line.name}: ${rights}`];
  if (talks) parts.push('talking now');
  if (!state.joined) parts.push('not joined');
  if (state.mutedByAdmin) parts.push('muted by admin');
  if (state.link) {
    const { quality, lossPercent, jitterMs } = state.link;
    parts.push(`link ${quality} (${lossPercent.toFixed(1)} % lost, ${Math.round(jitterMs)} ms jitter)`);
  }
  return `${parts.join(', ')}. ${state.mutedByAdmin ? 'Unmute' : 'Mute'} with a click.`;
}

function countPoorLinks() {
  poorLinks = 0;
  for (const user of members.values()) {
    if (user.lines?.some((line) => line.link?.quality === 'poor')) poorLinks += 1;
  }
}

function summarize() {
  const parts = [`${members.size} connected`, `${talking.size} talking`];
  if (poorLinks) parts.push(`${poorLinks} with a poor link`);
  setText(ui.summary, parts.join(' · '));
}

// ---------------------------------------------------------------------------------------------
// Filters: by name (rows) and by line (one column, and only its members)

function applyFilters() {
  const text = ui.name.value.trim().toLocaleLowerCase();
  const only = lines.some((l) => l.id === ui.line.value) ? ui.line.value : '';
  let shown = 0;
  for (const row of ui.rows.children) {
    const user = members.get(row.dataset.key);
    const visible =
      Boolean(user) &&
      (!text || user.username.toLocaleLowerCase().includes(text)) &&
      (!only || Boolean(lineOf(user, only)));
    row.hidden = !visible;
    if (visible) shown += 1;
  }
  // One column: the others' headers and cells hidden (every cell looked at only while a line
  // is chosen, or as the choice changes).
  const changed = ui.grid.dataset.only !== only;
  ui.grid.dataset.only = only;
  if (only || changed) {
    for (const cell of ui.grid.querySelectorAll('th[data-key], td[data-key]')) {
      if (cell.dataset.key !== MEMBER) cell.hidden = Boolean(only) && cell.dataset.key !== only;
    }
  }
  ui.empty.hidden = members.size > 0;
  ui.none.hidden = members.size === 0 || shown > 0;
  keepOneInTabOrder();
  summarize();
}

// ---------------------------------------------------------------------------------------------
// Actions

async function toggleMute(cell) {
  const identity = cell.parentElement.dataset.key;
  const user = members.get(identity);
  const state = lineOf(user, cell.dataset.key);
  if (!state || cell.hasAttribute('aria-busy')) return;
  const what = state.mutedByAdmin ? 'unmute' : 'mute';
  const name = lines.find((l) => l.id === state.groupId)?.name ?? state.groupId;
  cell.setAttribute('aria-busy', 'true');
  try {
    const body = await post(`/users/${seg(identity)}/lines/${seg(state.groupId)}/${what}`);
    showError(ui.error, null);
    if (body?.user) {
      members.set(identity, body.user);
      const row = rowOf(identity);
      if (row) updateRow(row, body.user);
    }
  } catch (error) {
    showError(ui.error, `Could not ${what} ${user.username} on ${name}: ${error.message}`);
  } finally {
    cell.removeAttribute('aria-busy');
  }
}

async function muteLine(groupId) {
  const line = lines.find((l) => l.id === groupId);
  if (!line) return;
  const what = line.muted ? 'unmute' : 'mute';
  try {
    await post(`/groups/${seg(groupId)}/${what}`);
    showError(ui.error, null);
  } catch (error) {
    showError(ui.error, `Could not ${what} the line ${line.name}: ${error.message}`);
  }
  await refresh();
}

/** Calls the line: its panels flash "Call from Admin"; the header flashes at the `call` event. */
async function callLine(button, groupId) {
  const name = lines.find((l) => l.id === groupId)?.name ?? groupId;
  button.disabled = true;
  try {
    await post(`/groups/${seg(groupId)}/call`);
    showError(ui.error, null);
  } catch (error) {
    showError(ui.error, `Could not call the line ${name}: ${error.message}`);
  } finally {
    button.disabled = false;
  }
}

async function closeDirect(groupId) {
  const line = lines.find((l) => l.id === groupId);
  try {
    await del(`/direct/${seg(groupId)}`);
    showError(ui.error, null);
  } catch (error) {
    showError(ui.error, `Could not close the direct line ${line?.name ?? groupId}: ${error.message}`);
  }
  await refresh();
}

// ---------------------------------------------------------------------------------------------
// Keyboard: one cell in the tab order, arrow keys move it, Enter and Space mute

/** Cells that can take the focus: shown (a hidden row, column, or a phone's empty cell is not). */
const reachable = (cell) => cell && !cell.hidden && !cell.parentElement.hidden && cell.getClientRects().length > 0;

function keepOneInTabOrder() {
  const [identity, groupId] = current?.split('\n') ?? [];
  let cell = cellIn(rowOf(identity), groupId);
  if (!reachable(cell)) cell = [...ui.rows.querySelectorAll('td.show-cell')].find(reachable) ?? null;
  for (const other of ui.rows.querySelectorAll('td.show-cell[tabindex="0"]')) {
    if (other !== cell) other.tabIndex = -1;
  }
  if (cell) cell.tabIndex = 0;
}

function takeTabOrder(cell) {
  current = talkKey(cell.parentElement.dataset.key, cell.dataset.key);
  for (const other of ui.rows.querySelectorAll('td.show-cell[tabindex="0"]')) other.tabIndex = -1;
  cell.tabIndex = 0;
}

/** The next reachable cell from `cell` along `step` (a function from a cell to its neighbour). */
function next(cell, step) {
  for (let at = step(cell); at; at = step(at)) if (reachable(at)) return at;
  return null;
}

const right = (cell) => cell.nextElementSibling;
const left = (cell) => (cell.previousElementSibling?.tagName === 'TD' ? cell.previousElementSibling : null);
/**
 * The cell above or below: the same line's in the nearest shown row, or, where that member is
 * not on it (the phone's list shows only their lines), that row's first.
 */
function nextRow(cell, forward) {
  for (let row = cell.parentElement; (row = forward ? row.nextElementSibling : row.previousElementSibling);) {
    if (row.hidden) continue;
    const same = cellIn(row, cell.dataset.key);
    if (reachable(same)) return same;
    const any = [...row.querySelectorAll('td.show-cell')].find(reachable);
    if (any) return any;
  }
  return null;
}

function onGridKey(event) {
  const cell = event.target.closest?.('td.show-cell');
  if (!cell) return;
  const row = cell.parentElement;
  const cells = () => [...row.querySelectorAll('td.show-cell')].filter(reachable);
  let to;
  switch (event.key) {
    case 'ArrowRight':
      to = next(cell, right);
      break;
    case 'ArrowLeft':
      to = next(cell, left);
      break;
    case 'ArrowDown':
      to = nextRow(cell, true);
      break;
    case 'ArrowUp':
      to = nextRow(cell, false);
      break;
    case 'Home':
      to = cells()[0];
      break;
    case 'End':
      to = cells().at(-1);
      break;
    case 'Enter':
    case ' ':
      event.preventDefault();
      toggleMute(cell);
      return;
    default:
      return;
  }
  event.preventDefault();
  to?.focus(); // and `focusin` puts it in the tab order
}

/** `/` anywhere on the Show tab (not while typing) goes to the name filter. */
function onSlash(event) {
  if (event.key !== '/' || ui.panel.hidden || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target.closest?.('input, textarea, select, [contenteditable]')) return;
  event.preventDefault();
  ui.name.focus();
  ui.name.select();
}

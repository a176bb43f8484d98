// Crew tab: who is in a room, and apart who holds a token without having joined
// (`GET /users?state=all`), since when, from which address, each one's lines (group,
// listen/talk, joined or not; a line being called flashes for the 5 s the API reports `call`),
// and the forced disconnect (`DELETE /users/{identity}`: confirmed in place, or with a ban of
// the name and/or the address chosen in a dialog) or one line taken away
// (`DELETE /users/{identity}/lines/{group}`); per line, the admin's mute of that user there
// (`POST …/lines/{group}/mute|unmute`) and forcing its talk off (`POST …/lines/{group}/talk-off`).
// Below, the bans in force (`GET /bans`) and lifting one (`DELETE /bans/{id}`).

import { del, get, post, seg } from '/admin/api.js';
import { confirmDialog, dateTime, h, relative, setAttr, setText, showError, syncKeyed } from '/admin/dom.js';
import * as groups from '/admin/groups.js';
import { keysText } from '/admin/positions.js';
import { actionsCell, confirmInPlace, elements, labelButton, load, showRows } from '/admin/tab.js';

let ctx;
let ui;
let users = [];
let bans = [];
/** How long a ban from the disconnect dialog lasts. */
const BAN_MINUTES = 60;
/** Identities being disconnected, and `identity line` pairs being removed: they wait for the answer. */
const leaving = new Set();

export function init(context) {
  ctx = context;
  ui = elements({
    rows: 'users-rows',
    pendingHead: 'users-pending-head',
    pendingRows: 'users-pending-rows',
    empty: 'users-empty',
    error: 'users-error',
    count: 'users-count',
    bans: 'bans-rows',
    bansEmpty: 'bans-empty',
    bansError: 'bans-error',
  });
}

export function reset() {
  users = [];
  ui.rows.replaceChildren();
  ui.pendingRows.replaceChildren();
  ui.pendingHead.hidden = true;
  showError(ui.error, null);
  ui.count.hidden = true;
  bans = [];
  ui.bans.replaceChildren();
}

export async function refresh() {
  const loaded = await load(
    ui.error,
    'users',
    async () => {
      const [body, banned] = await Promise.all([
        get('/users?state=all'),
        get('/bans'),
        groups.fetchGroups().catch(() => null),
      ]);
      users = body.users;
      bans = banned.bans;
    },
    // The same element says why a disconnect or a line's action failed: a refresh keeps it.
    { clear: false },
  );
  if (loaded) render();
}

/** By name. */
function order(a, b) {
  return a.username.localeCompare(b.username) || a.identity.localeCompare(b.identity);
}

function render() {
  const sorted = [...users].sort(order);
  const keyed = { key: (u) => u.identity, create: createRow, update: updateRow };
  syncKeyed(
    ui.rows,
    sorted.filter((u) => u.state === 'connected'),
    keyed,
  );
  const pending = sorted.filter((u) => u.state !== 'connected');
  syncKeyed(ui.pendingRows, pending, keyed);
  ui.pendingHead.hidden = pending.length === 0;
  showRows(ui.rows, ui.empty, sorted.length);
  const connected = sorted.length - pending.length;
  setText(ui.count, String(connected));
  ui.count.hidden = connected === 0;
  setAttr(ui.count, 'aria-label', `${connected} connected`);
  renderBans();
}

function renderBans() {
  syncKeyed(ui.bans, bans, {
    key: (ban) => String(ban.id),
    create: (ban) =>
      h(
        'tr',
        {},
        h('td', { dataset: { label: 'Name' } }, ban.username ?? '—'),
        h('td', { dataset: { label: 'Address' } }, ban.address ? h('code', {}, ban.address) : '—'),
        h(
          'td',
          { dataset: { label: 'Until' } },
          h('time', { datetime: ban.until, title: dateTime(ban.until) }, dateTime(ban.until)),
        ),
        h(
          'td',
          { class: 'cell-actions' },
          h(
            'button',
            {
              class: 'secondary small-button',
              type: 'button',
              'aria-label': `Lift the ban of ${ban.username ?? ban.address}`,
              onclick: () => onLift(ban),
            },
            'Lift',
          ),
        ),
      ),
    update: () => {},
  });
  showRows(ui.bans, ui.bansEmpty, bans.length);
}

async function onLift(ban) {
  try {
    await del(`/bans/${ban.id}`);
    showError(ui.bansError, null);
    bans = bans.filter((b) => b.id !== ban.id);
    renderBans();
  } catch (error) {
    showError(ui.bansError, `Could not lift the ban: ${error.message}`);
  } finally {
    ctx.refreshNow();
  }
}

function createRow(user) {
  const button = h(
    'button',
    {
      class: 'danger-outline small-button u-disconnect',
      type: 'button',
      title: 'They leave every line now and their token is revoked: they have to join again.',
    },
    'Disconnect',
  );
  confirmInPlace(button, () => onDisconnect(user.identity));
  // A ban is a choice among several (the name, the address): a dialog, which is its confirmation.
  const ban = h(
    'button',
    { class: 'ghost small-button u-ban', type: 'button', onclick: () => onDisconnectAndBan(user.identity) },
    'Ban…',
  );
  return h(
    'tr',
    {},
    h('td', { dataset: { label: 'Name' } }, h('strong', { class: 'u-name' })),
    h('td', { class: 'u-lines-cell', dataset: { label: 'Lines' } }, h('ul', { class: 'line-list u-lines' })),
    h('td', { class: 'u-kind', dataset: { label: 'Kind' } }),
    h('td', { dataset: { label: 'State' } }, h('span', { class: 'badge u-state' })),
    h('td', { dataset: { label: 'Since' } }, h('time', { class: 'u-since' })),
    h(
      'td',
      { dataset: { label: 'Identity' } },
      h('code', { class: 'u-identity' }),
      ' ',
      h('span', { class: 'muted small u-address' }),
    ),
    actionsCell(button, ban),
  );
}

function updateRow(row, user) {
  row.dataset.state = user.state;
  setText(row.querySelector('.u-name'), user.username);
  syncKeyed(
    row.querySelector('.u-lines'),
    user.lines ?? [{ groupId: user.groupId, listen: true, talk: true, joined: user.state === 'connected' }],
    {
      key: (line) => line.groupId,
      create: (line) => createLine(user.identity, line.groupId),
      update: (li, line) => updateLine(li, user, line),
    },
  );
  // A WHIP source or WHEP player: another system's client in the line, not a panel.
  const kind = user.stream
    ? `${user.stream.toUpperCase()} ${user.stream === 'whip' ? 'source' : 'player'}`
    : user.kind === 'server'
      ? 'server'
      : 'crew';
  setText(row.querySelector('.u-kind'), kind);
  setAttr(row, 'data-stream', user.stream ?? null);
  const state = row.querySelector('.u-state');
  setText(state, user.state);
  setAttr(state, 'data-state', user.state);
  // Connected: since the join. Pending: since the token was handed out.
  const since = user.connectedAt ?? user.lastActivity;
  const time = row.querySelector('.u-since');
  setText(time, relative(since));
  setAttr(time, 'datetime', since);
  setAttr(time, 'title', dateTime(since));
  setText(row.querySelector('.u-identity'), user.identity);
  const where = [user.address ? `from ${user.address}` : '', user.node ? `on node ${user.node}` : ''];
  setText(row.querySelector('.u-address'), where.filter(Boolean).join(', '));
  const button = row.querySelector('.u-disconnect');
  const ban = row.querySelector('.u-ban');
  labelButton(button, `Disconnect ${user.username}`);
  setAttr(ban, 'aria-label', `Disconnect and ban ${user.username}`);
  // A server audio user is bridged by the sound card: remove it in the Sound card tab instead.
  button.hidden = ban.hidden = user.kind === 'server';
  button.disabled = ban.disabled = leaving.has(user.identity);
}

function createLine(identity, groupId) {
  const remove = h(
    'button',
    { class: 'ghost small-button line-remove', type: 'button', onclick: () => onRemoveLine(identity, groupId) },
    'Remove',
  );
  const mute = h(
    'button',
    { class: 'ghost small-button line-mute', type: 'button', onclick: () => onLineAction(identity, groupId, 'mute') },
    'Mute',
  );
  const talkOff = h(
    'button',
    {
      class: 'ghost small-button line-talk-off',
      type: 'button',
      onclick: () => onLineAction(identity, groupId, 'talk-off'),
    },
    'Talk off',
  );
  return h(
    'li',
    { class: 'line-chip u-line' },
    h('span', { class: 'lc-name' }),
    ' ',
    h('span', { class: 'line-keys' }),
    ' ',
    h('span', { class: 'line-joined' }),
    h('span', { class: 'line-call' }, 'calling'),
    h('span', { class: 'line-muted' }, 'muted by admin'),
    h('span', { class: 'line-link' }),
    mute,
    talkOff,
    remove,
  );
}

/**
 * A line's link in a few words: `link good: 0.4 % lost, 3 ms jitter, 12 ms round trip`, and
 * `, relayed` when it goes through the TURN relay.
 */
function linkText({ quality, lossPercent, jitterMs, rttMs, candidateType }) {
  const rtt = Number.isFinite(rttMs) ? `, ${Math.round(rttMs)} ms round trip` : '';
  const relayed = candidateType === 'relay' ? ', relayed' : '';
  return `link ${quality}: ${lossPercent.toFixed(1)} % lost, ${Math.round(jitterMs)} ms jitter${rtt}${relayed}`;
}

/** A line's name: its group's, or for a direct line the other end's. */
const lineName = (line) => (line.directWith ? `Direct: ${line.directWith}` : groups.nameOf(line.groupId));

function updateLine(li, user, line) {
  const name = lineName(line);
  setText(li.querySelector('.lc-name'), name);
  setText(li.querySelector('.line-keys'), keysText(line));
  setText(li.querySelector('.line-joined'), line.joined ? 'joined' : 'not joined');
  setAttr(li, 'data-listen', String(line.listen));
  setAttr(li, 'data-talk', String(line.talk));
  setAttr(li, 'data-joined', String(line.joined));
  setAttr(li, 'data-call', line.call ? '' : null);
  setAttr(li, 'data-direct', line.directWith ?? null);
  const remove = li.querySelector('.line-remove');
  setText(remove, line.directWith ? 'Close' : 'Remove');
  setAttr(
    remove,
    'aria-label',
    line.directWith
      ? `Close the direct line of ${user.username} and ${line.directWith}`
      : `Remove ${user.username} from ${name}`,
  );
  remove.hidden = user.kind === 'server';
  remove.disabled = leaving.has(user.identity) || leaving.has(`${user.identity} ${line.groupId}`);
  setAttr(li, 'data-muted', line.mutedByAdmin ? '' : null);
  li.querySelector('.line-muted').hidden = !line.mutedByAdmin;
  // The link as the panel last measured it (control's judgement of its figures).
  setAttr(li, 'data-link', line.link?.quality ?? null);
  setAttr(li, 'data-relayed', line.link?.candidateType === 'relay' ? '' : null);
  setText(li.querySelector('.line-link'), line.link ? linkText(line.link) : '');
  const mute = li.querySelector('.line-mute');
  setText(mute, line.mutedByAdmin ? 'Unmute' : 'Mute');
  setAttr(mute, 'aria-pressed', String(Boolean(line.mutedByAdmin)));
  setAttr(mute, 'aria-label', `${line.mutedByAdmin ? 'Unmute' : 'Mute'} ${user.username} on ${name}`);
  const talkOff = li.querySelector('.line-talk-off');
  setAttr(talkOff, 'aria-label', `Switch off the talk of ${user.username} on ${name}`);
  talkOff.hidden = user.kind === 'server' || !line.talk || !line.joined;
}

/** The admin's mute (or release) of a user on a line, or its talk forced off: no confirmation (undone as easily). */
async function onLineAction(identity, groupId, action) {
  const user = users.find((u) => u.identity === identity);
  const line = user?.lines?.find((l) => l.groupId === groupId);
  if (!line) return;
  const what = action === 'mute' && line.mutedByAdmin ? 'unmute' : action;
  try {
    const body = await post(`/users/${seg(identity)}/lines/${seg(groupId)}/${what}`);
    showError(ui.error, null);
    if (body?.user) users = users.map((u) => (u.identity === identity ? body.user : u));
    render();
  } catch (error) {
    showError(ui.error, `Could not ${what.replace('-', ' ')} ${user.username} on ${lineName(line)}: ${error.message}`);
  } finally {
    ctx.refreshNow();
  }
}

async function onRemoveLine(identity, groupId) {
  const user = users.find((u) => u.identity === identity);
  if (!user) return;
  const line = user.lines?.find((l) => l.groupId === groupId);
  const name = line ? lineName(line) : groups.nameOf(groupId);
  const last = (user.lines?.length ?? 1) <= 1;
  const yes = await confirmDialog(
    line?.directWith
      ? {
          title: `Close the direct line of ${user.username} and ${line.directWith}?`,
          text: 'Both panels hang it up now; a person key opens a new one.',
          ok: 'Close direct line',
        }
      : {
          title: `Remove ${user.username} from ${name}?`,
          text: last
            ? `${name} is ${user.username}'s only line: they are disconnected and their token is revoked.`
            : `${user.username} leaves ${name} now and cannot join it again with this token; their other lines go on.`,
          ok: 'Remove from line',
        },
  );
  if (!yes) return;
  const key = `${identity} ${groupId}`;
  leaving.add(key);
  render();
  try {
    const body = await del(`/users/${seg(identity)}/lines/${seg(groupId)}`);
    showError(ui.error, null);
    if (body?.user && body.user.lines?.length) users = users.map((u) => (u.identity === identity ? body.user : u));
    else users = users.filter((u) => u.identity !== identity);
    render();
  } catch (error) {
    showError(ui.error, `Could not remove ${user.username} from ${name}: ${error.message}`);
  } finally {
    leaving.delete(key);
    ctx.refreshNow();
  }
}

/** Disconnect with a ban of the name and/or the address, chosen (and confirmed) in a dialog. */
async function onDisconnectAndBan(identity) {
  const user = users.find((u) => u.identity === identity);
  if (!user) return;
  const choices = [{ value: 'banName', label: `Refuse the name “${user.username}” new tokens for an hour` }];
  if (user.address)
    choices.push({
      value: 'banAddress',
      label: `Refuse the address ${user.address} new tokens for an hour (everyone behind it)`,
    });
  const chosen = await confirmDialog({
    title: `Disconnect and ban ${user.username}?`,
    text: `${user.username} leaves ${(user.lines ?? [user]).map((l) => groups.nameOf(l.groupId)).join(', ')} now and their token is revoked: they have to join again.`,
    ok: 'Disconnect',
    choices,
  });
  if (chosen) await disconnect(user, chosen);
}

/** Disconnect (confirmed in place). */
async function onDisconnect(identity) {
  const user = users.find((u) => u.identity === identity);
  if (user) await disconnect(user, new Set());
}

/** `DELETE /users/{identity}`, with the bans in `chosen` (`banName`, `banAddress`). */
async function disconnect(user, chosen) {
  const { identity } = user;
  leaving.add(identity);
  render();
  const ban = [...chosen].map((choice) => `${choice}=true`);
  const query = ban.length ? `?${[...ban, `banMinutes=${BAN_MINUTES}`].join('&')}` : '';
  try {
    await del(`/users/${seg(identity)}${query}`);
    showError(ui.error, null);
    users = users.filter((u) => u.identity !== identity);
    render();
  } catch (error) {
    showError(ui.error, `Could not disconnect ${user.username}: ${error.message}`);
  } finally {
    leaving.delete(identity);
    ctx.refreshNow();
  }
}

// Users tab: who is in a room, and apart who holds a token without having joined
// (`GET /users?state=all`), since when, and the forced disconnect (`DELETE /users/{identity}`)
// after a confirmation.

import { del, get, seg } from '/admin/api.js';
import { confirmDialog, dateTime, h, relative, setAttr, setText, showError, syncKeyed } from '/admin/dom.js';
import * as groups from '/admin/groups.js';

const $ = (id) => document.getElementById(id);
let ctx;
let ui;
let users = [];
/** Identities being disconnected: their rows wait for the answer. */
const leaving = new Set();

export function init(context) {
  ctx = context;
  ui = {
    rows: $('users-rows'),
    pendingHead: $('users-pending-head'),
    pendingRows: $('users-pending-rows'),
    empty: $('users-empty'),
    error: $('users-error'),
    count: $('users-count'),
  };
}

export function reset() {
  users = [];
  ui.rows.replaceChildren();
  ui.pendingRows.replaceChildren();
  ui.pendingHead.hidden = true;
  showError(ui.error, null);
  ui.count.hidden = true;
}

export async function refresh() {
  try {
    const [body] = await Promise.all([get('/users?state=all'), groups.fetchGroups().catch(() => null)]);
    users = body.users;
  } catch (error) {
    showError(ui.error, `Could not load the users: ${error.message}`);
    return;
  }
  render();
}

/** By name. */
function order(a, b) {
  return a.username.localeCompare(b.username) || a.identity.localeCompare(b.identity);
}

function render() {
  const sorted = [...users].sort(order);
  const keyed = { key: (u) => u.identity, create: createRow, update: updateRow };
  syncKeyed(ui.rows, sorted.filter((u) => u.state === 'connected'), keyed);
  const pending = sorted.filter((u) => u.state !== 'connected');
  syncKeyed(ui.pendingRows, pending, keyed);
  ui.pendingHead.hidden = pending.length === 0;
  ui.empty.hidden = sorted.length > 0;
  ui.rows.closest('.table-box').hidden = sorted.length === 0;
  const connected = sorted.length - pending.length;
  setText(ui.count, String(connected));
  ui.count.hidden = connected === 0;
  setAttr(ui.count, 'aria-label', `${connected} connected`);
}

function createRow(user) {
  const button = h('button', { class: 'danger-outline small-button', type: 'button', onclick: () => onDisconnect(user.identity) }, 'Disconnect');
  return h('tr', {},
    h('td', { dataset: { label: 'Name' } }, h('strong', { class: 'u-name' })),
    h('td', { class: 'u-group', dataset: { label: 'Group' } }),
    h('td', { class: 'u-kind', dataset: { label: 'Kind' } }),
    h('td', { dataset: { label: 'State' } }, h('span', { class: 'badge u-state' })),
    h('td', { dataset: { label: 'Since' } }, h('time', { class: 'u-since' })),
    h('td', { dataset: { label: 'Identity' } }, h('code', { class: 'u-identity' })),
    h('td', { class: 'cell-actions' }, h('div', { class: 'row-actions' }, button)));
}

function updateRow(row, user) {
  row.dataset.state = user.state;
  setText(row.querySelector('.u-name'), user.username);
  setText(row.querySelector('.u-group'), groups.nameOf(user.groupId));
  setText(row.querySelector('.u-kind'), user.kind === 'server' ? 'server' : 'crew');
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
  const button = row.querySelector('button');
  setAttr(button, 'aria-label', `Disconnect ${user.username}`);
  // A server audio user is bridged by the sound card: remove it in the Groups tab instead.
  button.hidden = user.kind === 'server';
  button.disabled = leaving.has(user.identity);
}

async function onDisconnect(identity) {
  const user = users.find((u) => u.identity === identity);
  if (!user) return;
  const yes = await confirmDialog({
    title: `Disconnect ${user.username}?`,
    text: `${user.username} leaves ${groups.nameOf(user.groupId)} now and their token is revoked: they have to join again.`,
    ok: 'Disconnect',
  });
  if (!yes) return;
  leaving.add(identity);
  render();
  try {
    await del(`/users/${seg(identity)}`);
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

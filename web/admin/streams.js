// Streams tab, WHIP and WHEP: each group's stream tokens (`/groups/{id}/stream-tokens`), one
// table for all groups with a Revoke per token (confirmed in place: its sessions end), and a
// form that creates one and shows its URL and secret this once (the API keeps only a hash).

import { del, get, post, seg } from '/admin/api.js';
import { clean, h, setText, showError, submitting, syncKeyed } from '/admin/dom.js';
import * as groups from '/admin/groups.js';
import { actionsCell, confirmInPlace, elements, labelButton, load, showRows, wireForm } from '/admin/tab.js';

let ctx;
let ui;
/** Every group's tokens: `{ group, id, kind, name, sessions }`. */
let tokens = [];

export function init(context) {
  ctx = context;
  ui = elements({
    rows: 'stream-tokens-rows',
    empty: 'stream-tokens-empty',
    listError: 'stream-tokens-error',
    form: 'stream-token-create',
    group: 'stream-token-group',
    kind: 'stream-token-kind',
    name: 'stream-token-name',
    error: 'stream-token-error',
    submit: 'stream-token-submit',
    created: 'stream-token-created',
    url: 'stream-token-url',
    secret: 'stream-token-secret',
  });
  wireForm(ui.form, onCreate);
}

export function reset() {
  tokens = [];
  ui.rows.replaceChildren();
  ui.form.reset();
  clean(ui.form);
  ui.created.hidden = true;
  showError(ui.error, null);
  showError(ui.listError, null);
}

export async function refresh() {
  const list = groups.current();
  const loaded = await load(ui.listError, 'stream tokens', async () => {
    const answers = await Promise.all(list.map((g) => get(`/groups/${seg(g.id)}/stream-tokens`)));
    tokens = answers.flatMap((body, i) => body.tokens.map((t) => ({ group: list[i].id, ...t })));
  });
  if (loaded) render(list);
}

function render(list) {
  const chosen = ui.group.value;
  ui.group.replaceChildren(...list.map((g) => h('option', { value: g.id }, g.name)));
  if (list.some((g) => g.id === chosen)) ui.group.value = chosen;
  syncKeyed(ui.rows, tokens, { key: (t) => `${t.group}/${t.id}`, create: createRow, update: updateRow });
  showRows(ui.rows, ui.empty, tokens.length);
}

function createRow(token) {
  const revoke = h(
    'button',
    {
      class: 'danger-outline small-button',
      type: 'button',
      title: 'Its running sessions end now, and its secret is refused from now on.',
    },
    'Revoke',
  );
  confirmInPlace(revoke, () => onRevoke(token.group, token.id));
  return h(
    'tr',
    {},
    h('td', { class: 'st-group', dataset: { label: 'Group' } }),
    h('td', { class: 'st-kind', dataset: { label: 'Kind' } }),
    h('td', { class: 'st-name', dataset: { label: 'Name' } }),
    h('td', { class: 'st-sessions', dataset: { label: 'Sessions' } }),
    actionsCell(revoke),
  );
}

function updateRow(row, token) {
  setText(row.querySelector('.st-group'), groups.nameOf(token.group));
  setText(row.querySelector('.st-kind'), token.kind === 'whip' ? 'WHIP (publish)' : 'WHEP (listen)');
  setText(row.querySelector('.st-name'), token.name);
  setText(row.querySelector('.st-sessions'), String(token.sessions));
  labelButton(row.querySelector('button'), `Revoke ${token.kind.toUpperCase()} token ${token.name}`);
}

async function onCreate(event) {
  event.preventDefault();
  const name = ui.name.value.trim();
  if (!name) {
    showError(ui.error, 'Type a name.');
    ui.name.focus();
    return;
  }
  let created = null;
  const ok = await submitting(ui.submit, ui.error, async () => {
    created = await post(`/groups/${seg(ui.group.value)}/stream-tokens`, { kind: ui.kind.value, name });
  });
  if (!ok || !created) return;
  ui.name.value = '';
  clean(ui.form);
  setText(ui.url, created.url);
  setText(ui.secret, created.secret);
  ui.created.hidden = false;
  ctx.refreshNow();
}

async function onRevoke(group, id) {
  const token = tokens.find((t) => t.group === group && t.id === id);
  if (!token) return;
  try {
    await del(`/groups/${seg(group)}/stream-tokens/${seg(id)}`);
    showError(ui.listError, null);
  } catch (error) {
    showError(ui.listError, `Could not revoke “${token.name}”: ${error.message}`);
  } finally {
    ctx.refreshNow();
  }
}

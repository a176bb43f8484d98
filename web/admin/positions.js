// Lines tab, the positions: the prepared panels (`/positions`: a name, the groups heard and talked to, an
// optional PIN, a site when the Janus nodes have sites, person keys to other positions), one
// form to create or edit them (a row of Listen/Talk checkboxes per group, a checkbox per other
// position for its person keys, the site among those of `/stats`' nodes),
// delete confirmed in place; and the join links of every position and group, each with its QR
// code (/common/qr.js) and a copy button.
//
// The API never gives a PIN back, only `pin: true`: the page shows "PIN set", and the PIN
// field is emptied after every save.

import { del, get, post, put, seg } from '/admin/api.js';
import { canSync, clean, copyText, h, setAttr, setText, showError, submitting, syncKeyed } from '/admin/dom.js';
import * as groups from '/admin/groups.js';
import { actionsCell, confirmInPlace, elements, labelButton, load, showRows, wireForm } from '/admin/tab.js';
import { drawQr } from '/common/qr.js';

/** The API's bound on a position's lines. */
const MAX_LINES = 12;

let ctx;
let ui;
let positions = [];
/** The sites of the Janus nodes (`janus.nodes[].site` in `/stats`). */
let sites = [];
/** The position being edited in the form (its id when the edit started), or null: create. */
let editing = null;

export function init(context) {
  ctx = context;
  ui = elements({
    rows: 'positions-rows',
    empty: 'positions-empty',
    listError: 'positions-error',
    form: 'position-form',
    title: 'position-form-title',
    name: 'position-name',
    lineRows: 'position-line-rows',
    linesCount: 'position-lines-count',
    noGroups: 'position-no-groups',
    pin: 'position-pin',
    pinLabel: 'position-pin-label',
    pinRemove: 'position-pin-remove',
    pinRemoveLabel: 'position-pin-remove-label',
    siteField: 'position-site-field',
    site: 'position-site',
    announce: 'position-announce',
    one: 'position-one',
    talkToField: 'position-talk-to-field',
    talkTo: 'position-talk-to',
    error: 'position-error',
    submit: 'position-submit',
    cancel: 'position-cancel',
    links: 'join-links',
    linksEmpty: 'join-links-empty',
  });
  wireForm(ui.form, onSubmit);
  ui.form.addEventListener('change', countLines);
  ui.form.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && editing) stopEdit();
  });
  ui.cancel.addEventListener('click', () => stopEdit());
  ui.pinRemove.addEventListener('change', () => {
    ui.pin.disabled = ui.pinRemove.checked;
  });
}

export function reset() {
  positions = [];
  editing = null;
  ui.rows.replaceChildren();
  ui.lineRows.replaceChildren();
  ui.links.replaceChildren();
  resetForm();
  showError(ui.listError, null);
}

export async function refresh() {
  const loaded = await load(ui.listError, 'positions', async () => {
    const [body, stats] = await Promise.all([get('/positions'), get('/stats'), groups.fetchGroups()]);
    positions = body.positions;
    sites = [...new Set((stats.janus?.nodes ?? []).map((node) => node.site).filter(Boolean))].sort();
  });
  if (loaded) render();
}

function render() {
  syncKeyed(ui.rows, positions, { key: (p) => p.id, create: createRow, update: updateRow });
  showRows(ui.rows, ui.empty, positions.length);
  renderPicker();
  renderSites();
  // The position being edited changed on the server (a group renamed, say): while the admin
  // is not using the form, it follows.
  const edited = positions.find((p) => p.id === editing);
  if (edited && canSync(ui.form)) {
    ui.name.value = edited.name;
    ui.site.value = edited.site ?? '';
    ui.announce.checked = edited.announce;
    ui.one.checked = edited.occupants === 'one';
    setPicked(edited);
    renderTalkTo(edited.talkTo);
    showMode();
  } else if (canSync(ui.form)) {
    renderTalkTo(checkedTalkTo());
  }
  renderLinks();
}

// ---------------------------------------------------------------------------------------------
// The list

function createRow(position) {
  const edit = h(
    'button',
    { class: 'secondary small-button', type: 'button', onclick: () => startEdit(position.id) },
    'Edit',
  );
  const remove = h(
    'button',
    {
      class: 'danger-outline small-button',
      type: 'button',
      title: 'Its join link stops working; crew who joined with it keep their lines. This cannot be undone.',
    },
    'Delete',
  );
  confirmInPlace(remove, () => onDelete(position.id));
  return h(
    'tr',
    {},
    h(
      'td',
      { class: 'cell-name', dataset: { label: 'Name' } },
      h('strong', { class: 'position-name' }),
      h('code', { class: 'position-id muted' }),
    ),
    h(
      'td',
      { dataset: { label: 'Lines' } },
      h('ul', { class: 'line-list position-lines' }),
      h('span', { class: 'badge position-site', hidden: true }),
      ' ',
      h('span', { class: 'badge position-announce', hidden: true }, 'Announce'),
      ' ',
      h('span', { class: 'badge position-one', hidden: true }, 'One at a time'),
      ' ',
      h('span', { class: 'badge position-talk-to', hidden: true }),
    ),
    h('td', { dataset: { label: 'PIN' } }, h('span', { class: 'position-pin' })),
    actionsCell(edit, remove),
  );
}

function updateRow(row, position) {
  setText(row.querySelector('.position-name'), position.name);
  setText(row.querySelector('.position-id'), position.id);
  syncKeyed(row.querySelector('.position-lines'), position.lines, {
    key: (line) => line.groupId,
    create: () =>
      h('li', { class: 'line-chip' }, h('span', { class: 'lc-name' }), ' ', h('span', { class: 'line-keys' })),
    update: (li, line) => {
      setText(li.querySelector('.lc-name'), line.name);
      setText(li.querySelector('.line-keys'), keysText(line));
      setAttr(li, 'data-listen', String(line.listen));
      setAttr(li, 'data-talk', String(line.talk));
    },
  });
  const site = row.querySelector('.position-site');
  site.hidden = !position.site;
  setText(site, position.site ? `site: ${position.site}` : '');
  row.querySelector('.position-announce').hidden = !position.announce;
  row.querySelector('.position-one').hidden = position.occupants !== 'one';
  const talkTo = row.querySelector('.position-talk-to');
  talkTo.hidden = position.talkTo.length === 0;
  setText(talkTo, position.talkTo.length ? `Person keys: ${position.talkTo.map(positionName).join(', ')}` : '');
  groups.pinBadge(row.querySelector('.position-pin'), position.pin);
  // The buttons act on the id the row shows now (a rename gives a new row).
  const [edit, remove] = row.querySelectorAll('.row-actions button');
  setAttr(edit, 'aria-label', `Edit ${position.name}`);
  labelButton(remove, `Delete ${position.name}`);
}

/** "listen · talk", "listen only", "talk only". */
export function keysText(line) {
  if (line.listen && line.talk) return 'listen · talk';
  return line.listen ? 'listen only' : 'talk only';
}

// ---------------------------------------------------------------------------------------------
// The form: create, or edit the position `editing`

/** One row of checkboxes per group; the admin's ticks stay through the refresh. */
function renderPicker() {
  const list = groups.current();
  syncKeyed(ui.lineRows, list, {
    key: (g) => g.id,
    create: (group) => {
      const box = (kind) =>
        h('input', { type: 'checkbox', name: kind, value: group.id, id: `position-${kind}-${group.id}` });
      const listen = box('listen');
      const talk = box('talk');
      return h(
        'div',
        { class: 'line-pick' },
        h('span', { class: 'line-pick-name' }),
        h(
          'label',
          { class: 'line-pick-box', for: listen.id },
          listen,
          h('span', { class: 'line-pick-label' }, 'Listen'),
        ),
        h('label', { class: 'line-pick-box', for: talk.id }, talk, h('span', { class: 'line-pick-label' }, 'Talk')),
      );
    },
    update: (row, group) => {
      setText(row.querySelector('.line-pick-name'), group.program ? `${group.name} (program)` : group.name);
      for (const input of row.querySelectorAll('input')) {
        setAttr(input, 'aria-label', `${input.name === 'listen' ? 'Listen to' : 'Talk to'} ${group.name}`);
      }
      // A program line is listen only: the API would refuse a talk key on it.
      const talk = row.querySelector('input[name="talk"]');
      talk.disabled = group.program === true;
      if (talk.disabled) talk.checked = false;
    },
  });
  ui.noGroups.hidden = list.length > 0;
  countLines();
}

/**
 * The site choices: "Any node" and the nodes' sites, plus a site a position still names that no
 * node has any more (so that its form shows it). Hidden while there is nothing to choose.
 */
function renderSites() {
  const named = positions.map((p) => p.site).filter((s) => s && !sites.includes(s));
  const choices = [...sites, ...new Set(named)];
  syncKeyed(ui.site, [{ id: '', name: 'Any node' }, ...choices.map((s) => ({ id: s, name: s }))], {
    key: (choice) => choice.id,
    create: (choice) => h('option', { value: choice.id }),
    update: (option, choice) => setText(option, choice.name),
  });
  ui.siteField.hidden = choices.length === 0;
}

function picked() {
  const ids = (kind) => [...ui.lineRows.querySelectorAll(`input[name="${kind}"]:checked`)].map((input) => input.value);
  return { listen: ids('listen'), talk: ids('talk') };
}

function countLines() {
  const { listen, talk } = picked();
  const lines = new Set([...listen, ...talk]).size;
  setText(ui.linesCount, `${lines} of at most ${MAX_LINES} lines chosen.`);
  setAttr(ui.linesCount, 'data-over', lines > MAX_LINES ? '' : null);
}

function setPicked(position) {
  for (const input of ui.lineRows.querySelectorAll('input[type="checkbox"]')) {
    input.checked = Boolean(position?.[input.name]?.includes(input.value));
  }
  countLines();
}

function resetForm() {
  ui.form.reset();
  clean(ui.form);
  ui.pin.disabled = false;
  setPicked(null);
  renderTalkTo([]);
  showError(ui.error, null);
}

const positionName = (id) => positions.find((p) => p.id === id)?.name ?? id;

/** A checkbox per other position (the one edited has no key to itself), `selected` ticked. */
function renderTalkTo(selected) {
  const others = positions.filter((p) => p.id !== editing);
  ui.talkToField.hidden = others.length === 0;
  ui.talkTo.replaceChildren(
    ...others.map((p) => {
      const id = `position-talk-to-${p.id}`;
      return h(
        'label',
        { class: 'toggle toggle-inline', for: id },
        h('input', { id, type: 'checkbox', value: p.id, checked: selected.includes(p.id) }),
        ' ',
        h('span', {}, p.name),
      );
    }),
  );
}

const checkedTalkTo = () => [...ui.talkTo.querySelectorAll('input:checked')].map((input) => input.value);

function showMode() {
  const position = positions.find((p) => p.id === editing);
  setText(ui.title, editing ? `Edit “${position?.name ?? editing}”` : 'New position');
  setText(ui.submit, editing ? 'Save position' : 'Create position');
  ui.cancel.hidden = !editing;
  const pinSet = Boolean(position?.pin);
  ui.pinRemoveLabel.hidden = !pinSet;
  setText(ui.pinLabel, pinSet ? 'New PIN (4–12 digits; empty: unchanged)' : 'PIN (4–12 digits, optional)');
  ui.pin.placeholder = pinSet ? 'unchanged' : 'none';
}

function startEdit(id) {
  const position = positions.find((p) => p.id === id);
  if (!position) return;
  editing = id;
  resetForm();
  ui.name.value = position.name;
  ui.site.value = position.site ?? '';
  ui.announce.checked = position.announce;
  ui.one.checked = position.occupants === 'one';
  setPicked(position);
  renderTalkTo(position.talkTo);
  showMode();
  ui.form.scrollIntoView?.({ block: 'nearest' });
  ui.name.focus();
  ui.name.select();
}

function stopEdit() {
  editing = null;
  resetForm();
  showMode();
}

async function onSubmit(event) {
  event.preventDefault();
  const name = ui.name.value.trim();
  if (!name) {
    showError(ui.error, 'Type a name.');
    ui.name.focus();
    return;
  }
  const pin = ui.pin.value.trim();
  if (pin !== '' && !ui.pinRemove.checked && !groups.PIN_PATTERN.test(pin)) {
    showError(ui.error, 'The PIN is 4 to 12 digits.');
    ui.pin.focus();
    return;
  }
  // Too few or too many lines: the API says so, in its own words, next to the form.
  const body = {
    name,
    ...picked(),
    announce: ui.announce.checked,
    talkTo: checkedTalkTo(),
    occupants: ui.one.checked ? 'one' : 'many',
  };
  if (!ui.siteField.hidden) body.site = ui.site.value || null;
  if (editing && ui.pinRemove.checked && !ui.pinRemoveLabel.hidden) body.pin = null;
  else if (pin !== '') body.pin = pin;
  const id = editing;
  const ok = await submitting(ui.submit, ui.error, () =>
    id ? put(`/positions/${seg(id)}`, body) : post('/positions', body),
  );
  if (ok) {
    editing = null;
    resetForm();
    showMode();
    ui.name.focus();
    ctx.refreshNow();
  } else {
    ui.pin.value = '';
    ui.name.focus();
  }
}

async function onDelete(id) {
  const position = positions.find((p) => p.id === id);
  if (!position) return;
  try {
    await del(`/positions/${seg(id)}`);
    showError(ui.listError, null);
    positions = positions.filter((p) => p.id !== id);
    if (editing === id) stopEdit();
    render();
    ctx.refreshNow();
  } catch (error) {
    showError(ui.listError, `Could not delete “${position.name}”: ${error.message}`);
  }
}

/** The refresh leaves the form alone while the admin uses it. */
export function formBusy() {
  return !canSync(ui.form);
}

// ---------------------------------------------------------------------------------------------
// Join links and their QR codes

/** The panel preset for a position. */
export function positionLink(id) {
  return `${location.origin}/?position=${encodeURIComponent(id)}`;
}

/** The panel preset for one group: listen and talk on it. */
export function groupLink(id) {
  const g = encodeURIComponent(id);
  return `${location.origin}/?groups=${g}&talk=${g}`;
}

function renderLinks() {
  const items = [
    ...positions.map((p) => ({
      key: `position:${p.id}`,
      kind: 'Position',
      name: p.name,
      pin: p.pin,
      url: positionLink(p.id),
    })),
    ...groups
      .current()
      .map((g) => ({ key: `group:${g.id}`, kind: 'Group', name: g.name, pin: g.pin, url: groupLink(g.id) })),
  ];
  syncKeyed(ui.links, items, { key: (item) => item.key, create: createLink, update: updateLink });
  ui.linksEmpty.hidden = items.length > 0;
}

function createLink() {
  const copy = h('button', { class: 'secondary small-button link-copy', type: 'button' }, 'Copy link');
  const status = h('span', { class: 'link-copied muted small', role: 'status' });
  const card = h(
    'article',
    { class: 'join-link-card' },
    h(
      'div',
      { class: 'join-link-head' },
      h('h3', { class: 'join-link-name' }),
      h('span', { class: 'badge join-link-kind' }),
      h('span', { class: 'badge join-link-pin', hidden: true }, 'PIN'),
    ),
    h('div', { class: 'qr', role: 'img' }),
    h('a', { class: 'join-link', target: '_blank', rel: 'noopener' }),
    h('div', { class: 'join-link-actions' }, copy, status),
  );
  copy.addEventListener('click', () => {
    const link = card.querySelector('.join-link');
    copyText(link.href, link, status);
  });
  return card;
}

function updateLink(card, item) {
  card.dataset.kind = item.kind.toLowerCase();
  setText(card.querySelector('.join-link-name'), item.name);
  setText(card.querySelector('.join-link-kind'), item.kind);
  card.querySelector('.join-link-pin').hidden = !item.pin;
  const link = card.querySelector('.join-link');
  if (link.getAttribute('href') !== item.url) {
    link.href = item.url;
    link.textContent = item.url;
    drawQr(card.querySelector('.qr'), item.url);
  }
  setAttr(card.querySelector('.qr'), 'aria-label', `QR code of the join link of ${item.name}`);
  setAttr(card.querySelector('.link-copy'), 'aria-label', `Copy the join link of ${item.name}`);
}

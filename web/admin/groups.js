// Lines tab, the groups: the list (keyed rows, edited in place), the create form,
// delete confirmed in place. A group may ask for a PIN (4 to 12 digits; the API only says
// whether one is set, `pin: true`). The API's own error messages are shown next to the form that
// caused them.

import { del, get, post, put, seg } from '/admin/api.js';
import { clean, h, setText, showError, submitting, syncKeyed } from '/admin/dom.js';
import { actionsCell, confirmInPlace, elements, labelButton, load, showRows, wireForm } from '/admin/tab.js';

let ctx;
let ui;

/** The groups last fetched, for the other tabs (group names, select options). */
let groups = [];
const subscribers = new Set();

export const current = () => groups;

/** `fn(groups)` after every fetch of the groups. */
export function subscribe(fn) {
  subscribers.add(fn);
}

/** The name of group `id`, or the id itself when it is unknown. */
export function nameOf(id) {
  return groups.find((g) => g.id === id)?.name ?? id;
}

export function init(context) {
  ctx = context;
  ui = elements({
    rows: 'groups-rows',
    empty: 'groups-empty',
    listError: 'groups-error',
    form: 'group-create',
    name: 'group-create-name',
    bitrate: 'group-create-bitrate',
    pin: 'group-create-pin',
    program: 'group-create-program',
    error: 'group-create-error',
    submit: 'group-create-submit',
  });
  wireForm(ui.form, onCreate);
}

export function reset() {
  groups = [];
  ui.rows.replaceChildren();
  ui.form.reset();
  clean(ui.form);
  showError(ui.error, null);
  showError(ui.listError, null);
}

/** Fetches the groups and updates the table; also used by other tabs for group names. */
export async function fetchGroups() {
  const body = await get('/groups');
  groups = body.groups;
  for (const fn of subscribers) fn(groups);
  return groups;
}

export async function refresh() {
  if (await load(ui.listError, 'groups', fetchGroups)) render();
}

function render() {
  syncKeyed(ui.rows, groups, {
    key: (g) => g.id,
    create: createRow,
    update: updateRow,
    keep: (row) => row.dataset.editing !== undefined,
  });
  // The rows, not the groups: a row being edited stays while its group is gone.
  showRows(ui.rows, ui.empty, ui.rows.children.length);
}

/**
 * A body from a form: the name trimmed, the bitrate a number or `null` when empty, the PIN
 * when one was typed (`null` when `removePin` is checked; absent otherwise: unchanged), and
 * whether it is a program line.
 */
function groupBody(nameInput, bitrateInput, pinInput, programInput, removePin) {
  const body = { name: nameInput.value.trim(), program: programInput.checked };
  const bitrate = bitrateInput.value.trim();
  body.audioBitrate = bitrate === '' ? null : Number(bitrate);
  const pin = pinInput.value.trim();
  if (removePin?.checked) body.pin = null;
  else if (pin !== '') body.pin = pin;
  return body;
}

/** A PIN as the API takes it: 4 to 12 digits. */
export const PIN_PATTERN = /^[0-9]{4,12}$/;

function localCheck(body) {
  if (!body.name) return 'Type a name.';
  if (body.audioBitrate !== null && !Number.isInteger(body.audioBitrate))
    return 'The bitrate is a whole number of kbit/s.';
  if (typeof body.pin === 'string' && !PIN_PATTERN.test(body.pin)) return 'The PIN is 4 to 12 digits.';
  return null;
}

async function onCreate(event) {
  event.preventDefault();
  const body = groupBody(ui.name, ui.bitrate, ui.pin, ui.program);
  const problem = localCheck(body);
  if (problem) {
    showError(ui.error, problem);
    ui.name.focus();
    return;
  }
  if (body.audioBitrate === null) delete body.audioBitrate;
  const ok = await submitting(ui.submit, ui.error, () => post('/groups', body));
  if (ok) {
    ui.form.reset();
    clean(ui.form);
    ui.name.focus();
    ctx.refreshNow();
  } else {
    ui.name.focus();
  }
}

// ---------------------------------------------------------------------------------------------
// Rows

/** "PIN set" (a badge) or a dash: the PIN itself is never shown, the API does not give it. */
export function pinBadge(element, set) {
  setText(element, set ? 'PIN set' : '—');
  element.classList.toggle('badge', Boolean(set));
  element.classList.toggle('muted', !set);
  element.toggleAttribute('data-pin', Boolean(set));
}

function bitrateText(group) {
  return group.followsDefaultBitrate ? `default (${group.audioBitrate})` : `${group.audioBitrate} kbit/s`;
}

function createRow() {
  return h('tr');
}

function updateRow(row, group) {
  row.dataset.group = JSON.stringify(group);
  if (!row.firstElementChild || row.dataset.mode !== 'view') {
    row.dataset.mode = 'view';
    const edit = h(
      'button',
      { class: 'secondary small-button', type: 'button', onclick: () => startEdit(row) },
      'Edit',
    );
    const remove = h(
      'button',
      {
        class: 'danger-outline small-button',
        type: 'button',
        title: 'Its room closes and everybody in it is disconnected. This cannot be undone.',
      },
      'Delete',
    );
    confirmInPlace(remove, () => onDelete(row));
    const mute = h(
      'button',
      { class: 'secondary small-button group-mute', type: 'button', onclick: () => onMute(row) },
      'Mute line',
    );
    row.replaceChildren(
      h(
        'td',
        { class: 'cell-name', dataset: { label: 'Name' } },
        h('strong', { class: 'group-name' }),
        ' ',
        h('span', { class: 'badge group-program', hidden: true }, 'Program'),
      ),
      h('td', { dataset: { label: 'Id' } }, h('code', { class: 'group-id' })),
      h('td', { class: 'group-bitrate', dataset: { label: 'Bitrate' } }),
      h('td', { dataset: { label: 'PIN' } }, h('span', { class: 'group-pin' })),
      actionsCell(mute, edit, remove),
    );
  }
  setText(row.querySelector('.group-name'), group.name);
  row.querySelector('.group-program').hidden = !group.program;
  setText(row.querySelector('.group-id'), group.id);
  setText(row.querySelector('.group-bitrate'), bitrateText(group));
  pinBadge(row.querySelector('.group-pin'), group.pin);
  const [mute, edit, remove] = row.querySelectorAll('button');
  edit.setAttribute('aria-label', `Edit ${group.name}`);
  labelButton(remove, `Delete ${group.name}`);
  // The admin's mute of the whole line: nobody on it is heard until released.
  row.toggleAttribute('data-muted', group.muted === true);
  setText(mute, group.muted ? 'Unmute line' : 'Mute line');
  mute.setAttribute('aria-pressed', String(group.muted === true));
  mute.setAttribute('aria-label', `${group.muted ? 'Unmute' : 'Mute'} the line ${group.name}`);
}

async function onMute(row) {
  const group = JSON.parse(row.dataset.group);
  try {
    await post(`/groups/${seg(group.id)}/${group.muted ? 'unmute' : 'mute'}`);
    showError(ui.listError, null);
    ctx.refreshNow();
  } catch (error) {
    showError(ui.listError, `Could not ${group.muted ? 'unmute' : 'mute'} “${group.name}”: ${error.message}`);
  }
}

/** Replaces a row's cells with an edit form; the refresh leaves the row alone meanwhile. */
function startEdit(row) {
  const group = JSON.parse(row.dataset.group);
  row.dataset.editing = '';
  row.dataset.mode = 'edit';
  const id = `edit-${group.id}`;
  const name = h('input', {
    id: `${id}-name`,
    type: 'text',
    maxlength: 64,
    value: group.name,
    autocomplete: 'off',
    required: true,
  });
  const bitrate = h('input', {
    id: `${id}-bitrate`,
    type: 'number',
    min: 6,
    max: 510,
    step: 1,
    inputmode: 'numeric',
    value: group.followsDefaultBitrate ? '' : group.audioBitrate,
    placeholder: `default (${group.audioBitrate})`,
  });
  const pin = h('input', {
    id: `${id}-pin`,
    type: 'password',
    inputmode: 'numeric',
    maxlength: 12,
    autocomplete: 'new-password',
    placeholder: group.pin ? 'unchanged' : 'none',
  });
  const program = h('input', { id: `${id}-program`, type: 'checkbox', checked: group.program });
  const removePin = group.pin ? h('input', { id: `${id}-pin-remove`, type: 'checkbox' }) : null;
  removePin?.addEventListener('change', () => {
    pin.disabled = removePin.checked;
  });
  const error = h('p', { class: 'message error', role: 'alert', hidden: true });
  const save = h('button', { class: 'primary', type: 'submit' }, 'Save');
  const cancel = h('button', { class: 'secondary', type: 'button', onclick: () => stopEdit(row) }, 'Cancel');
  const form = h(
    'form',
    { class: 'edit-form', novalidate: true, 'aria-label': `Edit group ${group.name}` },
    h(
      'div',
      { class: 'form-grid' },
      h('div', { class: 'field' }, h('label', { for: name.id }, 'Name'), name),
      h('div', { class: 'field' }, h('label', { for: bitrate.id }, 'Bitrate (kbit/s, optional)'), bitrate),
      h(
        'div',
        { class: 'field' },
        h('label', { for: pin.id }, group.pin ? 'New PIN (4–12 digits)' : 'PIN (4–12 digits, optional)'),
        pin,
        removePin &&
          h(
            'label',
            { class: 'toggle toggle-inline pin-remove', for: removePin.id },
            removePin,
            h('span', {}, 'Remove the PIN'),
          ),
      ),
      h(
        'div',
        { class: 'field' },
        h('label', { class: 'toggle toggle-inline', for: program.id }, program, h('span', {}, 'Program line')),
      ),
    ),
    error,
    h('div', { class: 'actions' }, cancel, save),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = groupBody(name, bitrate, pin, program, removePin);
    const problem = localCheck(body);
    if (problem) return showError(error, problem);
    const ok = await submitting(save, error, () => put(`/groups/${seg(group.id)}`, body));
    if (ok) {
      // A rename gives a new id: the row of the old id goes, the new one comes with the refresh.
      stopEdit(row);
      ctx.refreshNow();
    } else {
      name.focus();
    }
  });
  form.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') stopEdit(row);
  });
  row.replaceChildren(h('td', { class: 'cell-edit', colspan: 5 }, form));
  name.focus();
  name.select();
}

function stopEdit(row) {
  delete row.dataset.editing;
  const group = JSON.parse(row.dataset.group);
  row.dataset.mode = 'stale';
  updateRow(row, groups.find((g) => g.id === group.id) ?? group);
  row.querySelector('button')?.focus();
  if (!groups.some((g) => g.id === group.id)) render();
}

async function onDelete(row) {
  const group = JSON.parse(row.dataset.group);
  try {
    await del(`/groups/${seg(group.id)}`);
    showError(ui.listError, null);
    row.remove();
    groups = groups.filter((g) => g.id !== group.id);
    render();
    ctx.refreshNow();
  } catch (error) {
    showError(ui.listError, `Could not delete “${group.name}”: ${error.message}`);
  }
}

// Sound card tab (and the Lines tab's audio of the rooms). Device and sample rate (`/audio/device`, choices
// from `/devices/list`), the rooms' audio settings (`/config/audio`), the names of the 8
// inputs and 8 outputs (`/audio/channels/names`) and the server audio users
// (`/server-users`; writes answer 503 while partyline-bridged is not running, and that error is
// shown next to the form).

import { del, get, post, put, seg } from '/admin/api.js';
import {
  canSync,
  clean,
  confirmDialog,
  h,
  setOptions,
  setText,
  setValue,
  showError,
  submitting,
  syncKeyed,
} from '/admin/dom.js';
import * as groups from '/admin/groups.js';
import { ifbFields, ifbSummary } from '/admin/ifb.js';
import { $, actionsCell, elements, load, showRows, wireForm } from '/admin/tab.js';

const CHANNELS = 8;
const CARD_RATES = [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 176400, 192000];

let ctx;
let ui;
let names = { inputs: {}, outputs: {} };
let serverUsers = [];
let devicesAt = 0;

export function init(context) {
  ctx = context;
  ui = elements({
    deviceForm: 'device-form',
    deviceInput: 'device-input',
    deviceOutput: 'device-output',
    deviceRate: 'device-rate',
    devicePlatform: 'device-platform',
    deviceError: 'device-error',
    deviceOk: 'device-ok',
    deviceSubmit: 'device-submit',
    deviceRescan: 'device-rescan',
    audioForm: 'audio-form',
    audioRate: 'audio-rate',
    audioBitrate: 'audio-bitrate',
    audioJitter: 'audio-jitter',
    audioError: 'audio-error',
    audioOk: 'audio-ok',
    audioSubmit: 'audio-submit',
    channelsForm: 'channels-form',
    channelsInputs: 'channels-inputs',
    channelsOutputs: 'channels-outputs',
    channelsError: 'channels-error',
    channelsOk: 'channels-ok',
    channelsSubmit: 'channels-submit',
    suRows: 'server-users-rows',
    suEmpty: 'server-users-empty',
    suListError: 'server-users-list-error',
    suForm: 'server-user-create',
    suName: 'su-create-name',
    suGroup: 'su-create-group',
    suInput: 'su-create-input',
    suOutput: 'su-create-output',
    suError: 'su-create-error',
    suSubmit: 'su-create-submit',
  });
  ui.suIfb = ifbFields('su-create', null, inputLabel);
  ui.suForm.querySelector('.form-grid').after(ui.suIfb.element);
  setOptions(
    ui.deviceRate,
    CARD_RATES.map((r) => ({ value: r, label: `${r.toLocaleString('en')} Hz` })),
  );
  for (const [kind, box] of [
    ['inputs', ui.channelsInputs],
    ['outputs', ui.channelsOutputs],
  ]) {
    for (let i = 0; i < CHANNELS; i += 1) {
      const id = `channel-${kind}-${i}`;
      box.append(
        h('label', { for: id, class: 'channel-label' }, `${kind === 'inputs' ? 'In' : 'Out'} ${i}`),
        h('input', {
          id,
          name: `${kind}.${i}`,
          type: 'text',
          maxlength: 64,
          autocomplete: 'off',
          placeholder: 'unnamed',
        }),
      );
    }
  }
  wireForm(ui.deviceForm, onDevice);
  wireForm(ui.audioForm, onAudio);
  wireForm(ui.channelsForm, onChannels);
  wireForm(ui.suForm, onCreateServerUser);
  // "Revert": the form takes the server's values again at the next refresh (now).
  for (const form of [ui.deviceForm, ui.audioForm, ui.channelsForm]) {
    form.addEventListener('reset', (event) => {
      event.preventDefault();
      clean(form);
      for (const message of form.querySelectorAll('.message')) showError(message, null);
      form.querySelector('button[type="reset"]').blur();
      ctx.refreshNow();
    });
  }
  ui.deviceRescan.addEventListener('click', async () => {
    ui.deviceRescan.disabled = true;
    await refreshDeviceList();
    ui.deviceRescan.disabled = false;
  });
  groups.subscribe(() => {
    syncChannelSelects();
    if (document.activeElement !== ui.suGroup) syncGroupSelect(ui.suGroup);
    ui.suIfb.sync();
  });
  syncChannelSelects();
}

export function reset() {
  devicesAt = 0;
  serverUsers = [];
  ui.suRows.replaceChildren();
  for (const form of [ui.deviceForm, ui.audioForm, ui.channelsForm, ui.suForm]) {
    clean(form);
    for (const message of form.querySelectorAll('.message')) showError(message, null);
  }
  ui.suForm.reset();
}

export async function refresh() {
  const jobs = [refreshDevice(), refreshAudio(), refreshNames(), refreshServerUsers()];
  // The device list asks the sound server (up to 2 s, and control logs a warning when there is
  // none): once per login, then on "Rescan" only.
  if (!devicesAt) jobs.push(refreshDeviceList());
  await Promise.allSettled(jobs);
}

/** Shows a passing confirmation under a form. */
function flash(element, text) {
  showError(element, text);
  clearTimeout(element.timer);
  element.timer = setTimeout(() => showError(element, null), 4000);
}

// ---------------------------------------------------------------------------------------------
// Device

async function refreshDeviceList() {
  try {
    const list = await get('/devices/list');
    devicesAt = Date.now();
    const options = (entries) => [
      { value: '', label: 'System default' },
      ...entries.map((d) => ({
        value: d.identifier,
        label: `${d.description.replace(/^(Input|Output): /, '')} (${d.channels} ch, ${d.sampleRate} Hz)${d.isDefault ? ' — default' : ''}${d.note ? ' — channel map not in card order: remap it' : ''}`,
      })),
    ];
    ui.deviceLists = { inputs: options(list.inputs), outputs: options(list.outputs) };
    setText(ui.devicePlatform, `Devices from ${list.platform}.`);
    applyDeviceLists();
  } catch (error) {
    setText(ui.devicePlatform, `Could not list the devices: ${error.message}`);
  }
}

/** The device choices; a select keeps its value, and one the admin has open is left alone. */
function applyDeviceLists() {
  if (!ui.deviceLists) return;
  if (document.activeElement !== ui.deviceInput) {
    setOptions(ui.deviceInput, withCurrent(ui.deviceLists.inputs, ui.device?.inputDeviceId));
  }
  if (document.activeElement !== ui.deviceOutput) {
    setOptions(ui.deviceOutput, withCurrent(ui.deviceLists.outputs, ui.device?.outputDeviceId));
  }
}

/** The selected device stays selectable even when the sound server no longer lists it. */
function withCurrent(options, id) {
  if (!id || options.some((o) => o.value === id)) return options;
  return [...options, { value: id, label: `${id} (not found now)` }];
}

async function refreshDevice() {
  try {
    const { device } = await get('/audio/device');
    ui.device = device;
    if (!canSync(ui.deviceForm)) return;
    applyDeviceLists();
    if (!ui.deviceLists) {
      setOptions(ui.deviceInput, withCurrent([{ value: '', label: 'System default' }], device.inputDeviceId));
      setOptions(ui.deviceOutput, withCurrent([{ value: '', label: 'System default' }], device.outputDeviceId));
    }
    setValue(ui.deviceInput, device.inputDeviceId ?? '');
    setValue(ui.deviceOutput, device.outputDeviceId ?? '');
    if (!CARD_RATES.includes(device.sampleRate)) {
      setOptions(
        ui.deviceRate,
        [...CARD_RATES, device.sampleRate].sort((a, b) => a - b).map((r) => ({ value: r, label: `${r} Hz` })),
      );
    }
    setValue(ui.deviceRate, device.sampleRate);
  } catch (error) {
    if (canSync(ui.deviceForm)) showError(ui.deviceError, `Could not load the device: ${error.message}`);
  }
}

async function onDevice(event) {
  event.preventDefault();
  const body = {
    inputDeviceId: ui.deviceInput.value || null,
    outputDeviceId: ui.deviceOutput.value || null,
    sampleRate: Number(ui.deviceRate.value),
  };
  const ok = await submitting(ui.deviceSubmit, ui.deviceError, async () => {
    const { device } = await post('/audio/device', body);
    ui.device = device;
  });
  if (ok) {
    clean(ui.deviceForm);
    flash(ui.deviceOk, 'Device saved.');
    ctx.refreshNow();
  }
}

// ---------------------------------------------------------------------------------------------
// Audio settings

export async function refreshAudio() {
  try {
    const config = await get('/config');
    const audio = config.audio ?? {};
    if (!canSync(ui.audioForm)) return;
    setValue(ui.audioRate, audio.sampleRate);
    setValue(ui.audioBitrate, audio.defaultBitrate);
    setValue(ui.audioJitter, audio.jitterBufferMs);
  } catch (error) {
    if (canSync(ui.audioForm)) showError(ui.audioError, `Could not load the audio settings: ${error.message}`);
  }
}

async function onAudio(event) {
  event.preventDefault();
  const body = {
    sampleRate: Number(ui.audioRate.value),
    defaultBitrate: Number(ui.audioBitrate.value),
    jitterBufferMs: Number(ui.audioJitter.value),
  };
  if (!ui.audioBitrate.value.trim() || !ui.audioJitter.value.trim()) {
    showError(ui.audioError, 'Fill in the bitrate and the jitter buffer.');
    return;
  }
  const ok = await submitting(ui.audioSubmit, ui.audioError, () => put('/config/audio', body));
  if (ok) {
    clean(ui.audioForm);
    flash(ui.audioOk, 'Audio settings saved.');
    ctx.refreshNow();
  }
}

// ---------------------------------------------------------------------------------------------
// Channel names

async function refreshNames() {
  try {
    const { channelNames } = await get('/audio/channels/names');
    names = channelNames;
    syncChannelSelects();
    if (!canSync(ui.channelsForm)) return;
    for (const kind of ['inputs', 'outputs']) {
      for (let i = 0; i < CHANNELS; i += 1) setValue($(`channel-${kind}-${i}`), names[kind]?.[i] ?? '');
    }
  } catch (error) {
    if (canSync(ui.channelsForm)) showError(ui.channelsError, `Could not load the channel names: ${error.message}`);
  }
}

async function onChannels(event) {
  event.preventDefault();
  const body = { inputs: {}, outputs: {} };
  for (const kind of ['inputs', 'outputs']) {
    for (let i = 0; i < CHANNELS; i += 1) body[kind][i] = $(`channel-${kind}-${i}`).value.trim();
  }
  const ok = await submitting(ui.channelsSubmit, ui.channelsError, async () => {
    const answer = await put('/audio/channels/names', body);
    names = answer.channelNames;
  });
  if (ok) {
    clean(ui.channelsForm);
    flash(ui.channelsOk, 'Channel names saved.');
    syncChannelSelects();
    ctx.refreshNow();
  }
}

/** "0 · Stage mic" or "0". */
function channelLabel(kind, i) {
  const name = names[kind]?.[i];
  return name ? `${i} · ${name}` : `${i}`;
}

const inputLabel = (i) => channelLabel('inputs', i);

function channelOptions(kind, withNone) {
  const options = Array.from({ length: CHANNELS }, (_, i) => ({ value: i, label: channelLabel(kind, i) }));
  return withNone ? [{ value: '', label: 'No output' }, ...options] : options;
}

function syncGroupSelect(select) {
  const list = groups.current();
  setOptions(
    select,
    list.length ? list.map((g) => ({ value: g.id, label: g.name })) : [{ value: '', label: 'No groups yet' }],
  );
}

/**
 * The channel choices of the server-user form and rows. A select's options are replaced only
 * while it does not have the focus, and its value is kept.
 */
function syncChannelSelects() {
  if (document.activeElement !== ui.suInput) setOptions(ui.suInput, channelOptions('inputs', false));
  if (document.activeElement !== ui.suOutput) setOptions(ui.suOutput, channelOptions('outputs', true));
  for (const row of ui.suRows.children)
    if (row.dataset.editing === undefined) updateServerUserRow(row, JSON.parse(row.dataset.user));
  if (!ui.suIfb.element.contains(document.activeElement)) ui.suIfb.sync();
}

// ---------------------------------------------------------------------------------------------
// Server audio users

async function refreshServerUsers() {
  const loaded = await load(ui.suListError, 'server audio users', async () => {
    const body = await get('/server-users');
    serverUsers = body.serverUsers;
  });
  if (loaded) render();
}

function render() {
  syncKeyed(ui.suRows, serverUsers, {
    key: (u) => u.id,
    create: () => h('tr'),
    update: updateServerUserRow,
    keep: (row) => row.dataset.editing !== undefined,
  });
  // The rows, not the users: a row being edited stays while its user is gone.
  showRows(ui.suRows, ui.suEmpty, ui.suRows.children.length);
}

function serverUserBody(name, group, input, output, ifb) {
  return {
    name: name.value.trim(),
    group: group.value,
    inputChannel: Number(input.value),
    outputChannel: output.value === '' ? null : Number(output.value),
    ifb: ifb.read(),
  };
}

async function onCreateServerUser(event) {
  event.preventDefault();
  const body = serverUserBody(ui.suName, ui.suGroup, ui.suInput, ui.suOutput, ui.suIfb);
  if (!body.name) return showError(ui.suError, 'Type a name.');
  if (!body.group) return showError(ui.suError, 'Create a group first.');
  const ok = await submitting(ui.suSubmit, ui.suError, () => post('/server-users', body));
  if (ok) {
    ui.suForm.reset();
    ui.suIfb.reset();
    clean(ui.suForm);
    syncGroupSelect(ui.suGroup);
    syncChannelSelects();
    ctx.refreshNow();
  }
}

function updateServerUserRow(row, user) {
  row.dataset.user = JSON.stringify(user);
  if (row.dataset.mode !== 'view') {
    row.dataset.mode = 'view';
    row.replaceChildren(
      h('td', { dataset: { label: 'Name' } }, h('strong', { class: 'su-name' })),
      h('td', { class: 'su-group', dataset: { label: 'Group' } }),
      h('td', { class: 'su-input', dataset: { label: 'Input' } }),
      h(
        'td',
        { dataset: { label: 'Output' } },
        h('span', { class: 'su-output' }),
        h('div', { class: 'su-ifb muted small' }),
      ),
      actionsCell(
        h('button', { class: 'secondary small-button', type: 'button', onclick: () => startEdit(row) }, 'Edit'),
        h('button', { class: 'danger-outline small-button', type: 'button', onclick: () => onDelete(row) }, 'Delete'),
      ),
    );
  }
  setText(row.querySelector('.su-name'), user.name);
  setText(row.querySelector('.su-group'), groups.nameOf(user.group));
  setText(row.querySelector('.su-input'), channelLabel('inputs', user.inputChannel));
  setText(
    row.querySelector('.su-output'),
    user.outputChannel == null ? 'No output' : channelLabel('outputs', user.outputChannel),
  );
  const ifb = row.querySelector('.su-ifb');
  ifb.hidden = !user.ifb;
  setText(ifb, user.ifb ? ifbSummary(user.ifb, inputLabel) : '');
  const [edit, remove] = row.querySelectorAll('button');
  edit.setAttribute('aria-label', `Edit ${user.name}`);
  remove.setAttribute('aria-label', `Delete ${user.name}`);
}

function startEdit(row) {
  const user = JSON.parse(row.dataset.user);
  row.dataset.editing = '';
  row.dataset.mode = 'edit';
  const id = `su-edit-${user.id}`;
  const name = h('input', { id: `${id}-name`, type: 'text', maxlength: 64, value: user.name, autocomplete: 'off' });
  const group = h('select', { id: `${id}-group` });
  const input = h('select', { id: `${id}-input` });
  const output = h('select', { id: `${id}-output` });
  const ifb = ifbFields(id, user.ifb, inputLabel);
  syncGroupSelect(group);
  if (!groups.current().some((g) => g.id === user.group)) group.append(h('option', { value: user.group }, user.group));
  setOptions(input, channelOptions('inputs', false));
  setOptions(output, channelOptions('outputs', true));
  group.value = user.group;
  input.value = String(user.inputChannel);
  output.value = user.outputChannel == null ? '' : String(user.outputChannel);
  const error = h('p', { class: 'message error', role: 'alert', hidden: true });
  const save = h('button', { class: 'primary', type: 'submit' }, 'Save');
  const cancel = h('button', { class: 'secondary', type: 'button', onclick: () => stopEdit(row) }, 'Cancel');
  const field = (label, control) => h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
  const form = h(
    'form',
    { class: 'edit-form', novalidate: true, 'aria-label': `Edit server audio user ${user.name}` },
    h(
      'div',
      { class: 'form-grid' },
      field('Name', name),
      field('Group', group),
      field('Input channel', input),
      field('Output channel', output),
    ),
    ifb.element,
    error,
    h('div', { class: 'actions' }, cancel, save),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = serverUserBody(name, group, input, output, ifb);
    if (!body.name) return showError(error, 'Type a name.');
    const ok = await submitting(save, error, () => put(`/server-users/${seg(user.id)}`, body));
    if (ok) {
      stopEdit(row);
      ctx.refreshNow();
    }
  });
  form.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') stopEdit(row);
  });
  row.replaceChildren(h('td', { class: 'cell-edit', colspan: 5 }, form));
  name.focus();
}

function stopEdit(row) {
  delete row.dataset.editing;
  row.dataset.mode = 'stale';
  const user = JSON.parse(row.dataset.user);
  updateServerUserRow(row, serverUsers.find((u) => u.id === user.id) ?? user);
  row.querySelector('button')?.focus();
  render();
}

async function onDelete(row) {
  const user = JSON.parse(row.dataset.user);
  const yes = await confirmDialog({
    title: `Delete the server audio user “${user.name}”?`,
    text: `Input ${user.inputChannel} stops sending into ${groups.nameOf(user.group)}.`,
    ok: 'Delete',
  });
  if (!yes) return;
  try {
    await del(`/server-users/${seg(user.id)}`);
    showError(ui.suListError, null);
    ctx.refreshNow();
  } catch (error) {
    showError(ui.suListError, `Could not delete “${user.name}”: ${error.message}`);
  }
}

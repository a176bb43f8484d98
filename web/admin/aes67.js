// Sound card tab, AES67 network audio (`/aes67`, `/config/aes67`): the settings, the PTP follower's
// state, and the streams SAP announces on the media network, each with a “Hear on the inputs”
// button that stores its SDP as the received stream (the server checks it: a stream partyline
// cannot receive is refused with the reason, shown next to the form).

import { get, put } from '/admin/api.js';
import { canSync, clean, h, setText, setValue, showError, submitting, syncKeyed } from '/admin/dom.js';
import { actionsCell, elements, load, showRows, wireForm } from '/admin/tab.js';

let ctx;
let ui;
/** The settings as the server has them (the form's “Revert” and the base of each save). */
let settings = null;

export function init(context) {
  ctx = context;
  ui = elements({
    form: 'aes67-form',
    ptp: 'aes67-ptp',
    iface: 'aes67-interface',
    domain: 'aes67-domain',
    latency: 'aes67-latency',
    grandmasters: 'aes67-grandmasters',
    sendName: 'aes67-send-name',
    sendAddress: 'aes67-send-address',
    sendChannels: 'aes67-send-channels',
    sdp: 'aes67-sdp',
    error: 'aes67-error',
    ok: 'aes67-ok',
    submit: 'aes67-submit',
    rows: 'aes67-streams-rows',
    empty: 'aes67-streams-empty',
  });
  wireForm(ui.form, onSave);
  ui.form.addEventListener('reset', (event) => {
    event.preventDefault();
    fill(true);
  });
}

export function reset() {
  settings = null;
  ui.rows.replaceChildren();
  showError(ui.error, null);
}

export async function refresh() {
  let view;
  const loaded = await load(
    ui.error,
    'AES67 settings',
    async () => {
      view = await get('/aes67');
    },
    // The same element says why a save failed: a refresh keeps it.
    { clear: false },
  );
  if (!loaded) return;
  settings = view.settings;
  fill(false);
  setText(ui.ptp, ptpText(view));
  const streams = view.announced;
  syncKeyed(ui.rows, streams, {
    key: (s) => `${s.source} ${s.stream?.sessionId ?? s.sdp}`,
    create: createRow,
    update: updateRow,
  });
  showRows(ui.rows, ui.empty, streams.length);
}

function ptpText(view) {
  const ptp = view.ptp;
  const where = `domain ${ptp.domain}`;
  // -1: GStreamer's figure wrapped; bridged's log says what to change on the grandmaster.
  const delay =
    ptp.pathDelayNs < 0 ? 'path delay unknown (see the log)' : `path delay ${(ptp.pathDelayNs / 1000).toFixed(1)} µs`;
  switch (ptp.state) {
    case 'locked':
      return `PTP: locked to grandmaster ${ptp.grandmaster} (${where}), offset ${(ptp.offsetNs / 1000).toFixed(1)} µs, ${delay}.`;
    case 'lost':
      return `PTP: grandmaster ${ptp.grandmaster} lost: the clock runs free, audio goes on (${where}).`;
    case 'held':
      return `PTP: grandmaster ${ptp.grandmaster} is not one of those followed: partyline's clock holds, audio goes on (${where}).`;
    case 'acquiring':
      return `PTP: looking for a grandmaster (${where}).`;
    default:
      return view.settings.interface
        ? 'PTP: partyline-bridged is not following the network yet.'
        : 'AES67 is off: set the media network interface.';
  }
}

/** Fills the form from the server's settings, unless the admin is editing (or `force`). */
function fill(force) {
  if (!settings || (!force && !canSync(ui.form))) return;
  setValue(ui.iface, settings.interface ?? '');
  setValue(ui.domain, settings.ptpDomain);
  setValue(ui.latency, settings.receiveLatencyMs);
  setValue(ui.grandmasters, settings.grandmasters.join(', '));
  setValue(ui.sendName, settings.send.name);
  setValue(ui.sendAddress, settings.send.address ?? '');
  setValue(ui.sendChannels, settings.send.channels);
  setValue(ui.sdp, settings.receiveSdp ?? '');
  clean(ui.form);
}

function fromForm() {
  const text = (input) => input.value.trim() || null;
  return {
    ...settings,
    interface: text(ui.iface),
    ptpDomain: Number(ui.domain.value),
    receiveLatencyMs: Number(ui.latency.value),
    grandmasters: ui.grandmasters.value.split(/[\s,]+/).filter(Boolean),
    receiveSdp: text(ui.sdp),
    send: {
      ...settings.send,
      name: ui.sendName.value.trim(),
      address: text(ui.sendAddress),
      channels: Number(ui.sendChannels.value),
    },
  };
}

async function save(next) {
  showError(ui.ok, null);
  const ok = await submitting(ui.submit, ui.error, async () => {
    settings = (await put('/config/aes67', next)).settings;
  });
  if (!ok) return;
  fill(true);
  setText(ui.ok, 'AES67 settings saved.');
  ui.ok.hidden = false;
  ctx.refreshNow();
}

function onSave(event) {
  event.preventDefault();
  if (settings) save(fromForm());
}

function createRow(stream) {
  const hear = h(
    'button',
    {
      class: 'secondary small-button',
      type: 'button',
      onclick: () => settings && save({ ...settings, receiveSdp: stream.sdp }),
    },
    'Hear on the inputs',
  );
  return h(
    'tr',
    {},
    h('td', { class: 'aes-name', dataset: { label: 'Name' } }),
    h('td', { class: 'aes-channels', dataset: { label: 'Channels' } }),
    h('td', { class: 'aes-source', dataset: { label: 'From' } }),
    h('td', { class: 'aes-address', dataset: { label: 'Address' } }),
    actionsCell(hear),
  );
}

function updateRow(row, announced) {
  const stream = announced.stream;
  setText(row.querySelector('.aes-name'), stream ? stream.name : `(cannot be received: ${announced.problem})`);
  setText(row.querySelector('.aes-channels'), stream ? `${stream.channels} × ${stream.encoding}` : '');
  setText(row.querySelector('.aes-source'), announced.source);
  setText(row.querySelector('.aes-address'), stream ? `${stream.group}:${stream.port}` : '');
  const button = row.querySelector('button');
  button.disabled = !stream;
  button.setAttribute('aria-label', `Hear ${stream?.name ?? 'this stream'} on the inputs`);
}

// The page's elements, looked up once, and its two message areas: the form's error line and
// the panel's message under the status. Every other module of the panel writes the page
// through these.

export const root = document.documentElement;

const $ = (id) => document.getElementById(id);

export const ui = {
  joinView: $('join-view'),
  form: $('join-form'),
  preset: $('preset'),
  groupField: $('group-field'),
  groupLabel: $('group-label'),
  group: $('group'),
  username: $('username'),
  pinField: $('pin-field'),
  pin: $('pin'),
  join: $('join'),
  joinError: $('join-error'),
  callView: $('call-view'),
  who: $('who'),
  callName: $('call-name'),
  status: $('status-text'),
  message: $('call-message'),
  lines: $('lines'),
  announce: $('announce'),
  announceHint: $('announce-hint'),
  people: $('people'),
  personKeys: $('person-keys'),
  reply: $('reply'),
  template: $('line-template'),
  meterOut: $('meter-out'),
  leave: $('leave'),
  rejoin: $('rejoin'),
  theme: $('theme'),
  remote: $('remote'),
  remoteLink: $('remote-link'),
  remoteQr: $('remote-qr'),
  remoteCertificate: $('remote-certificate'),
  remoteSha256: $('remote-sha256'),
};

/** The panel's message under the status line: an error (red) or a notice; none with `null`. */
export function showMessage(text, isError = true) {
  ui.message.hidden = !text;
  ui.message.textContent = text ?? '';
  ui.message.classList.toggle('error', isError);
}

/** The join form's error line; none with `null`. */
export function showJoinError(text) {
  ui.joinError.hidden = !text;
  ui.joinError.textContent = text ?? '';
}

// Remote control: a control surface holding this panel's key (`/api/panel/{key}`) works its
// keys; control sends each command down the session's event stream, the panel applies it as if
// pressed on screen and reports its state back (`POST /api/session/state`, with the command's
// id), which is what the surface reads. Also the panel's "Remote control" box: the key's link,
// its QR code and the certificate's SHA-256 to pin.

import { drawQr } from '/common/qr.js';
import { api } from '/join/api.js';
import { session } from '/join/session.js';
import { saveLineSettings } from '/join/settings.js';
import { root, ui } from '/join/ui.js';

const nextSwitch = (state, on) => (state === 'toggle' ? !on : state === 'on');

export function applyCommand(line, command) {
  if (line && !line.ended) {
    if (command.talk && line.canTalk) {
      const on = line.talk !== 'off';
      if (command.talk === 'off') {
        if (on) line.setTalk('off');
        if (command.reason) line.showReleased(command.reason);
      } else if (!line.admin) {
        // `on` holds the key for the surface (a key already on stays as it is: a latch is not
        // turned into a hold its surface's silence would release); `toggle` latches it or lets it go.
        const next = command.talk === 'on' ? (on ? line.talk : 'remote') : on ? 'off' : 'latched';
        if (next !== line.talk) line.setTalk(next);
      }
    }
    if (command.listen && line.info.listen) {
      line.listenOn = nextSwitch(command.listen, line.listenOn);
      saveLineSettings();
      line.applyListen();
    }
    if (Number.isInteger(command.volume)) {
      line.volume = Math.max(0, Math.min(100, command.volume));
      const slider = line.q('[data-action="volume"]');
      slider.value = String(line.volume);
      slider.setAttribute('aria-valuetext', `${line.volume} %`);
      saveLineSettings();
      line.applyListen();
    }
  }
  root.dataset.remoteApplied = String(Number(root.dataset.remoteApplied ?? 0) + 1);
  reportState(command.id);
}

const reporting = { busy: false, again: false, acks: [] };

/**
 * Reports the panel's state to control: at once for a command (`ack`: its id), otherwise
 * after the report in flight, so that a burst of changes costs two requests.
 */
export async function reportState(ack) {
  if (ack !== undefined) reporting.acks.push(ack);
  const token = session.token?.token;
  if (!token || !session.events) return;
  if (reporting.busy) {
    reporting.again = true;
    return;
  }
  reporting.busy = true;
  try {
    do {
      reporting.again = false;
      const acks = reporting.acks.splice(0);
      const lines = session.lines.filter((line) => !line.ended).map((line) => line.report());
      const send = (id) =>
        api('/session/state', {
          method: 'POST',
          body: JSON.stringify({ token, lines, ...(id === undefined ? {} : { ack: id }) }),
        });
      // Each acknowledged command gets its own report (a report acknowledges one).
      await Promise.all(acks.length ? acks.map(send) : [send()]);
    } while (reporting.again || reporting.acks.length);
  } catch {
    // The session ended or control is away: the next change reports again.
  } finally {
    reporting.busy = false;
  }
}

export function showRemote() {
  const url = session.token?.panelUrl;
  ui.remote.hidden = !url;
  if (!url) return;
  ui.remoteLink.href = url;
  ui.remoteLink.textContent = url;
  drawQr(ui.remoteQr, url);
  // Without TLS there is no certificate to pin.
  const sha256 = session.token.certificateSha256;
  ui.remoteCertificate.hidden = !sha256;
  ui.remoteSha256.textContent = sha256 ?? '';
}

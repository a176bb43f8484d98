// Calls: POST /api/call flashes a line on every panel on it (the flash itself arrives through
// the session's event stream, events.js). A control without calls answers 404, and the panel
// then shows no call button.

import { HttpError, api } from '/join/api.js';
import { session } from '/join/session.js';
import { root, showMessage } from '/join/ui.js';

export function showCallButtons() {
  for (const line of session.lines) line.q('[data-action="call"]').hidden = !session.callAvailable || line.ended;
}

export async function sendCall(line) {
  const token = session.token?.token;
  if (!token || root.dataset.state !== 'connected') return;
  const button = line.q('[data-action="call"]');
  button.disabled = true;
  try {
    await api('/call', { method: 'POST', body: JSON.stringify({ token, groupId: line.groupId }) });
  } catch (error) {
    if (error instanceof HttpError && error.status === 404 && /route not found/i.test(error.message)) {
      session.callAvailable = false;
      showCallButtons();
    } else {
      showMessage(`Call on ${line.info.name} failed: ${error.message}`, true);
    }
  } finally {
    setTimeout(() => {
      button.disabled = false;
    }, 1_000);
  }
}

// The lines' links: every few seconds while connected, each line's peer connection measures
// its link (loss of what it hears, jitter, round trip: connection.js), control judges it
// (POST /api/session/link: good, degraded or poor, the same judgement the admin sees) and the
// line's card shows it, with a warning while it is not good.

import { api } from '/join/api.js';
import { lineById, session } from '/join/session.js';

/** How often the links are measured and reported. */
const REPORT_MS = 5_000;

let timer = null;

/** Starts measuring (again): on every connect. */
export function followLinks() {
  clearInterval(timer);
  timer = setInterval(report, REPORT_MS);
}

export function stopLinks() {
  clearInterval(timer);
  timer = null;
}

async function report() {
  const connection = session.connection;
  const token = session.token?.token;
  if (!connection || connection.closed || !token) return;
  const measured = (await Promise.all(connection.liveLinks.map((link) => link.measure().catch(() => null)))).filter(
    (figures) => figures !== null,
  );
  if (measured.length === 0) return;
  try {
    const judged = await api('/session/link', { method: 'POST', body: JSON.stringify({ token, lines: measured }) });
    for (const { groupId, quality } of judged.lines ?? []) {
      lineById(groupId)?.setLink(
        quality,
        measured.find((m) => m.groupId === groupId),
      );
    }
  } catch {
    // A report lost (the network, a session ending) is the next one's to make.
  }
}

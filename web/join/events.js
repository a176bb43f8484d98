// The session's event stream (Server-Sent Events, `/api/session/events`): calls, the admin's
// hold on a line, and the remote control's commands, each handed to its line; the panel's
// people (person keys, direct lines, reply: people.js); `moved`, when the session's media
// server node went away (the page joins again at once); `disconnected`, when the admin ended
// the session; and on partyline's rooms `members`, who is on each line and who talks there. Optional: a control without it answers 404, and the panel then has no
// calls.

import { showCallButtons } from '/join/calls.js';
import { setDirectLines } from '/join/lines.js';
import { applyPeople } from '/join/people.js';
import { applyCommand, reportState } from '/join/remote.js';
import { lineById, session } from '/join/session.js';

/**
 * Reads the session's event stream while `token` is the session's; reopens it when it drops.
 * `onMoved(from)`: the session's Janus node `from` was lost or removed.
 */
export async function followEvents(token, onMoved) {
  session.events?.abort();
  const abort = new AbortController();
  session.events = abort;
  while (!abort.signal.aborted) {
    try {
      const response = await fetch(`/api/session/events?token=${encodeURIComponent(token)}`, {
        headers: { Accept: 'text/event-stream' },
        signal: abort.signal,
      });
      if (response.status === 404 && !response.headers.get('content-type')?.includes('event-stream')) {
        const body = await response.json().catch(() => ({}));
        // The route is not there: no calls on this control. (A 404 about the token is a
        // token that ended: the reconnect brings a new one.)
        if (body.code === 'route_not_found' || /Route not found/.test(body.error ?? '')) {
          session.callAvailable = false;
          showCallButtons();
          return;
        }
      }
      if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
      session.callAvailable = true;
      showCallButtons();
      const reading = readEvents(response.body, abort.signal, onMoved);
      reportState();
      await reading;
    } catch {
      // dropped: try again shortly, unless this session is over
    }
    if (abort.signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}

async function readEvents(body, signal, onMoved) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  signal.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true });
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const field of block.split('\n')) {
        if (field.startsWith('event:')) event = field.slice(6).trim();
        else if (field.startsWith('data:')) data.push(field.slice(5).replace(/^ /, ''));
      }
      if (data.length) onServerEvent(event, data.join('\n'), onMoved);
    }
  }
}

function onServerEvent(event, data, onMoved) {
  let body;
  try {
    body = JSON.parse(data);
  } catch {
    return;
  }
  if (event === 'moved') {
    onMoved(body.from);
    return;
  }
  if (event === 'disconnected') {
    session.connection?.kicked();
    return;
  }
  if (event === 'members') {
    session.connection?.setMembers?.(body.lines);
    return;
  }
  if (event === 'people') {
    applyPeople(body, setDirectLines);
    reportState();
    return;
  }
  const line = lineById(body.groupId);
  if (event === 'command') {
    applyCommand(line, body);
    return;
  }
  if (!line || line.ended) return;
  if (event === 'admin') {
    line.setAdmin(body);
    reportState();
  } else if (event === 'call') {
    line.showCall(body.from ?? 'someone');
    navigator.vibrate?.([120, 80, 120]);
  }
}

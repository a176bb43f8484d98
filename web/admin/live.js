// The live event stream (`GET /api/admin/events`, Server-Sent Events): every event makes the
// page fetch again at once, so a change shows within one fetch instead of at the next 3 s tick
// (which stays underneath as the floor); and each event with its data goes, as it comes, to
// whoever writes it into the page in place (the Show tab's talk lights). EventSource cannot send the admin token, so the stream
// is read with fetch. Reconnects with Last-Event-ID after a drop; the badge says whether the
// stream is up (`data-live="on|off"`).

import { token } from '/admin/api.js';

const RETRY_MS = 1_000;

let badge = null;
let onChange = () => {};
let onEvent = () => {};
let controller = null;
let lastId = null;

/**
 * `badgeElement` shows the state; `changed(names)` is called at most once per frame with the
 * names of the events since the last call (`null`: unknown, after a reconnect);
 * `event(name, data)` at once for each event (`data`: its JSON, parsed; `name` null after a
 * reconnect, when events may have been missed).
 */
export function init(badgeElement, changed, event = () => {}) {
  badge = badgeElement;
  onChange = changed;
  onEvent = event;
  show(false);
}

export function start() {
  if (controller) return;
  controller = new AbortController();
  run(controller.signal);
}

export function stop() {
  controller?.abort();
  controller = null;
  lastId = null;
  show(false);
}

function show(live) {
  if (!badge) return;
  badge.dataset.live = live ? 'on' : 'off';
  badge.dataset.tone = live ? 'ok' : 'warn';
  badge.textContent = live ? 'Live' : 'Polling';
  badge.title = live
    ? 'Changes show as they happen (event stream connected)'
    : 'Event stream not connected: refreshing every 3 s';
}

let pending = null;
function changed(name) {
  if (pending) {
    pending.add(name);
    return;
  }
  pending = new Set([name]);
  requestAnimationFrame(() => {
    const names = pending;
    pending = null;
    onChange(names.has(null) ? null : names);
  });
}

async function run(signal) {
  while (!signal.aborted) {
    try {
      await follow(signal);
    } catch {
      // dropped or refused: shown as polling, tried again
    }
    show(false);
    if (signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/** Hands one event and its data (`data:` lines, JSON) to `onEvent`; a page error there stays there. */
function deliver(name, lines) {
  const text = lines
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, ''))
    .join('\n');
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: passed on as null
  }
  try {
    onEvent(name, data);
  } catch (error) {
    console.error(error);
  }
}

async function follow(signal) {
  const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${token.get()}` };
  if (lastId !== null) headers['Last-Event-ID'] = lastId;
  const response = await fetch('/api/admin/events', { headers, signal, cache: 'no-store' });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  show(true);
  // Whatever happened while the stream was down: fetch once now.
  onEvent(null, null);
  changed(null);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll('\r\n', '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const id = block.split('\n').find((line) => line.startsWith('id:'));
      if (id) lastId = id.slice(3).trim();
      // A comment (keep-alive) is no change; any event is, `reset` and `overflow` included.
      const lines = block.split('\n');
      const name = lines
        .find((line) => line.startsWith('event:'))
        ?.slice(6)
        .trim();
      if (!name) continue;
      deliver(name, lines);
      changed(name);
    }
  }
}

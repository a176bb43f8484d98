// System tab, the logs: control's log ring (`GET /logs`), oldest at the top and newest at the bottom like
// a terminal, coloured by level. The first fetch takes the newest 200 entries of the chosen
// level; every later one only what is newer than the newest `seq` seen (`after=`). Pause stops
// fetching (and catches up on resume); Auto-scroll keeps the newest line in view.

import { get } from '/admin/api.js';
import { h, setText, showError } from '/admin/dom.js';
import { elements, load } from '/admin/tab.js';

const FIRST = 200;
const MAX_LINES = 1000;
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

let ui;
let lastSeq = 0;
let paused = false;
let generation = 0;

export function init(context) {
  ui = elements({
    level: 'log-level',
    follow: 'log-follow',
    pause: 'log-pause',
    clear: 'log-clear',
    list: 'log-list',
    status: 'log-status',
    error: 'logs-error',
  });
  ui.level.value = sessionStorage.getItem('partyline.admin.logLevel') ?? 'trace';
  ui.level.addEventListener('change', () => {
    sessionStorage.setItem('partyline.admin.logLevel', ui.level.value);
    restart();
    context.refreshNow();
  });
  ui.pause.addEventListener('click', () => {
    paused = !paused;
    ui.pause.setAttribute('aria-pressed', String(paused));
    setText(ui.pause, paused ? 'Resume' : 'Pause');
    ui.list.toggleAttribute('data-paused', paused);
    status();
    if (!paused) context.refreshNow();
  });
  ui.clear.addEventListener('click', () => {
    // Only the view: newer entries keep coming.
    ui.list.replaceChildren();
    status();
  });
  ui.follow.addEventListener('change', () => {
    if (ui.follow.checked) scrollToEnd();
  });
  // Scrolling up to read turns auto-scroll off; back at the bottom turns it on again.
  ui.list.addEventListener('scroll', () => {
    const atEnd = ui.list.scrollHeight - ui.list.scrollTop - ui.list.clientHeight < 8;
    if (ui.list.dataset.autoscrolling) return;
    if (ui.follow.checked !== atEnd) ui.follow.checked = atEnd;
  });
}

export function reset() {
  restart();
  paused = false;
  ui.pause.setAttribute('aria-pressed', 'false');
  setText(ui.pause, 'Pause');
  ui.list.removeAttribute('data-paused');
}

function restart() {
  generation += 1;
  lastSeq = 0;
  total = undefined;
  ui.list.replaceChildren();
  showError(ui.error, null);
  status();
}

export async function refresh() {
  if (paused) return;
  const asked = generation;
  const level = ui.level.value;
  const query = lastSeq ? `level=${level}&after=${lastSeq}&limit=${MAX_LINES}` : `level=${level}&limit=${FIRST}`;
  let body;
  const loaded = await load(ui.error, 'logs', async () => {
    body = await get(`/logs?${query}`);
  });
  if (!loaded) return;
  // The level changed (or the view was reset) while this was on its way: drop it.
  if (asked !== generation || paused) return;
  const fresh = body.logs.filter((entry) => entry.seq > lastSeq).reverse();
  if (fresh.length) {
    lastSeq = fresh.at(-1).seq;
    const follow = ui.follow.checked;
    ui.list.append(...fresh.map(line));
    while (ui.list.children.length > MAX_LINES) ui.list.firstElementChild.remove();
    if (follow) scrollToEnd();
  }
  status(body.total);
}

function scrollToEnd() {
  ui.list.dataset.autoscrolling = '';
  ui.list.scrollTop = ui.list.scrollHeight;
  requestAnimationFrame(() => delete ui.list.dataset.autoscrolling);
}

let total;

function status(matching = total) {
  total = matching;
  const shown = ui.list.children.length;
  const parts = [`${shown} line${shown === 1 ? '' : 's'} shown`];
  if (total !== undefined) parts.push(`${total} of this level kept by the server`);
  if (paused) parts.push('paused');
  setText(ui.status, parts.join(' · '));
}

function time(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  return t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

function fieldsText(fields) {
  const entries = Object.entries(fields ?? {});
  if (!entries.length) return '';
  return entries.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
}

function line(entry) {
  const level = LEVELS.includes(entry.level) ? entry.level : 'info';
  const fields = fieldsText(entry.meta);
  return h(
    'li',
    { class: `log-line level-${level}`, dataset: { seq: entry.seq, level } },
    h('time', { class: 'log-time', datetime: entry.timestamp, title: entry.timestamp }, time(entry.timestamp)),
    h('span', { class: 'log-level' }, level.toUpperCase()),
    h('span', { class: 'log-message' }, entry.message),
    fields ? h('span', { class: 'log-fields' }, fields) : null,
    h('span', { class: 'log-source' }, entry.source),
  );
}

// System tab, the stats: figures from `GET /stats`, fetched on every tick whatever the tab (the chart needs
// the samples, and it tells the app whether the server answers), a chart of the last minutes
// drawn in SVG from the samples this page keeps (also across a reload of the tab), and the TLS
// certificate's SHA-256, with a copy button, for a control surface to pin.

import { get } from '/admin/api.js';
import { bytes, copyText, duration, h, setAttr, setText, svg, syncKeyed } from '/admin/dom.js';
import { $, elements, load, showRows } from '/admin/tab.js';

const SAMPLES_KEY = 'partyline.admin.samples';
const WINDOW_MS = 15 * 60_000;
const MAX_SAMPLES = 400;
const H = 140;
const PAD = { top: 10, right: 8, bottom: 20, left: 40 };

let ui;
let samples = [];

export function init() {
  ui = {
    ...elements({
      active: 'stat-active',
      total: 'stat-total',
      uptime: 'stat-uptime',
      rss: 'stat-rss',
      janusState: 'janus-state',
      janusVersion: 'janus-version',
      janusRooms: 'janus-rooms',
      janusParticipants: 'janus-participants',
      janusError: 'janus-error',
      nodes: 'nodes-rows',
      bridgeState: 'bridge-state',
      bridgeGeneration: 'bridge-generation',
      bridgeMessage: 'bridge-message',
      participants: 'participants-rows',
      branches: 'branches-rows',
      branchesEmpty: 'branches-empty',
      tlsState: 'tls-state',
      tlsSha256: 'tls-sha256',
      tlsCopyActions: 'tls-copy-actions',
      error: 'stats-error',
    }),
    charts: {
      connections: makeChart($('chart-connections'), 'series-1', 'Connections over the last minutes'),
      memory: makeChart($('chart-memory'), 'series-2', 'Memory (RSS) over the last minutes'),
    },
  };
  $('tls-copy').addEventListener('click', () => copyText(ui.tlsSha256.textContent, ui.tlsSha256, $('tls-copied')));
  try {
    samples = JSON.parse(sessionStorage.getItem(SAMPLES_KEY) ?? '[]').filter((s) => Number.isFinite(s.t));
  } catch {
    samples = [];
  }
}

export function reset() {
  samples = [];
  sessionStorage.removeItem(SAMPLES_KEY);
  drawCharts();
}

export function shown(tab) {
  if (tab === 'system') drawCharts();
}

export async function refresh() {
  let stats;
  const loaded = await load(ui.error, 'stats', async () => {
    stats = await get('/stats');
  });
  if (!loaded) return;
  const now = Date.now();
  samples.push({ t: now, active: stats.activeConnections, rss: stats.memory?.rss ?? 0 });
  samples = samples.filter((s) => s.t > now - WINDOW_MS).slice(-MAX_SAMPLES);
  try {
    sessionStorage.setItem(SAMPLES_KEY, JSON.stringify(samples));
  } catch {
    // storage full or off: the chart starts again on reload
  }
  render(stats);
}

function render(stats) {
  setText(ui.active, stats.activeConnections);
  setText(ui.total, stats.totalConnections);
  setText(ui.uptime, duration(stats.uptime));
  setText(ui.rss, bytes(stats.memory?.rss));

  const janus = stats.janus ?? {};
  badge(ui.janusState, janus.state, { up: 'ok', down: 'bad', unconfigured: 'warn' });
  setText(ui.janusVersion, janus.version ?? '—');
  setText(ui.janusRooms, janus.rooms ?? '—');
  setText(ui.janusParticipants, janus.participants ?? '—');
  setText(ui.janusError, janus.lastError || '—');
  // The pool's nodes (one, `local`, unless the config lists several), the first beside bridged.
  syncKeyed(ui.nodes, janus.nodes ?? [], {
    key: (n) => n.name,
    create: () =>
      h(
        'tr',
        {},
        h('td', { class: 'n-name', dataset: { label: 'Node' } }),
        h('td', { dataset: { label: 'State' } }, h('span', { class: 'badge n-state' })),
        h('td', { class: 'n-sessions num', dataset: { label: 'Sessions' } }),
        h('td', { class: 'n-load num', dataset: { label: 'Participants / capacity' } }),
        h('td', { class: 'n-cascaded', dataset: { label: 'Cascaded groups' } }),
      ),
    update: (row, n) => {
      setText(row.querySelector('.n-name'), n.site ? `${n.name} (${n.site})` : n.name);
      badge(row.querySelector('.n-state'), n.state, { up: 'ok', down: 'bad' });
      setText(row.querySelector('.n-sessions'), n.sessions);
      setText(row.querySelector('.n-load'), `${n.participants} / ${n.capacity}`);
      setText(row.querySelector('.n-cascaded'), n.cascaded.length ? n.cascaded.join(', ') : '—');
    },
  });

  const bridge = stats.bridge ?? {};
  badge(ui.bridgeState, bridge.state, {
    running: 'ok',
    idle: 'ok',
    degraded: 'warn',
    unconfigured: 'warn',
    error: 'bad',
    unreachable: 'bad',
    absent: 'bad',
  });
  setText(ui.bridgeGeneration, bridge.generation ?? '—');
  setText(ui.bridgeMessage, bridge.message || '—');
  const stateTones = { joined: 'ok', connecting: 'warn', retrying: 'warn', stopped: 'bad' };
  const participants = bridge.participants ?? [];
  syncKeyed(ui.participants, participants, {
    key: (p) => p.room,
    create: () =>
      h(
        'tr',
        {},
        h('td', { class: 'p-room', dataset: { label: 'Room' } }),
        h('td', { class: 'p-display', dataset: { label: 'As' } }),
        h('td', { dataset: { label: 'State' } }, h('span', { class: 'badge p-state' })),
        h('td', { class: 'p-packets num', dataset: { label: 'Packets out / in' } }),
        h('td', { class: 'p-error', dataset: { label: 'Last error' } }),
      ),
    update: (row, p) => {
      setText(row.querySelector('.p-room'), p.room);
      setText(row.querySelector('.p-display'), p.display);
      badge(row.querySelector('.p-state'), p.state, stateTones);
      setText(row.querySelector('.p-packets'), `${p.packetsSent} / ${p.packetsReceived}`);
      setText(row.querySelector('.p-error'), p.lastError || '—');
    },
  });
  showRows(ui.participants, null, participants.length);
  const level = (db) => (Number.isFinite(db) ? `${db.toFixed(1)} dBFS` : '—');
  const branches = bridge.branches ?? [];
  syncKeyed(ui.branches, branches, {
    key: (b) => b.name,
    create: () =>
      h(
        'tr',
        {},
        h('td', { class: 'b-name', dataset: { label: 'User' } }),
        h('td', { class: 'b-room', dataset: { label: 'Group' } }),
        h('td', { dataset: { label: 'Room state' } }, h('span', { class: 'badge b-state' })),
        h('td', { class: 'b-level num', dataset: { label: 'Input level' } }),
        h('td', { class: 'b-output num', dataset: { label: 'Output level' } }),
      ),
    update: (row, b) => {
      setText(row.querySelector('.b-name'), b.name);
      setText(row.querySelector('.b-room'), b.room);
      badge(row.querySelector('.b-state'), b.state, stateTones);
      setText(row.querySelector('.b-level'), level(b.inputLevelDb));
      setText(row.querySelector('.b-output'), level(b.outputLevelDb));
    },
  });
  showRows(ui.branches, ui.branchesEmpty, branches.length);

  const sha256 = stats.tls?.certificateSha256;
  badge(ui.tlsState, stats.tls?.enabled ? 'on' : 'off', { on: 'ok', off: 'neutral' });
  setText(ui.tlsSha256, sha256 ?? '—');
  ui.tlsCopyActions.hidden = !sha256;

  // Drawing costs little, but only a visible chart needs it.
  if (!$('panel-stats').hidden) drawCharts();
}

function badge(element, state, tones) {
  setText(element, state ?? '—');
  setAttr(element, 'data-tone', tones[state] ?? 'neutral');
}

// ---------------------------------------------------------------------------------------------
// Charts: one SVG per series, time on x (the last WINDOW_MS), the value on y from 0 to a
// rounded maximum. Redrawn by replacing the points of two paths: no layout of the page moves.

function makeChart(figure, seriesClass, label) {
  const grid = svg('g', { class: 'chart-grid' });
  const area = svg('path', { class: `chart-area ${seriesClass}` });
  const line = svg('path', { class: `chart-line ${seriesClass}` });
  const labels = svg('g', { class: 'chart-labels', 'aria-hidden': 'true' });
  const element = svg('svg', { role: 'img', 'aria-label': label, height: H }, grid, area, line, labels);
  figure.append(h('div', { class: 'chart-box' }, element));
  // Drawn at the box's own width in pixels: text stays text-sized on a phone and a desktop.
  new ResizeObserver(() => drawCharts()).observe(figure);
  return { figure, element, grid, area, line, labels, range: figure.querySelector('.chart-range') };
}

/** 1, 2 or 5 times a power of ten, at least `value`. */
function niceCeil(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function drawCharts() {
  if (!ui) return;
  const now = Date.now();
  drawChart(
    ui.charts.connections,
    samples.map((s) => [s.t, s.active]),
    now,
    (v) => String(Math.round(v)),
    true,
  );
  drawChart(
    ui.charts.memory,
    samples.map((s) => [s.t, s.rss / 1024 / 1024]),
    now,
    (v) => (v >= 10 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(1)),
    false,
  );
}

function drawChart(chart, points, now, format, integer) {
  const W = Math.round(chart.element.getBoundingClientRect().width);
  if (W < 50) return; // hidden
  chart.element.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const x0 = PAD.left;
  const x1 = W - PAD.right;
  const y0 = H - PAD.bottom;
  const y1 = PAD.top;
  // The window grows with the samples, from 1 minute up to WINDOW_MS, in whole minutes.
  const oldest = points.length ? points[0][0] : now;
  const span = Math.min(WINDOW_MS, Math.max(1, Math.ceil((now - oldest) / 60_000)) * 60_000);
  const max = points.reduce((m, [, v]) => Math.max(m, v), 0);
  const top = integer ? Math.max(2, niceCeil(max)) : niceCeil(max * 1.1);
  const x = (t) => x0 + ((t - (now - span)) / span) * (x1 - x0);
  const y = (v) => y0 - (v / top) * (y0 - y1);

  // Grid and labels: three horizontal lines (0, half, top) and the time marks.
  const lines = [0, top / 2, top];
  chart.grid.replaceChildren(...lines.map((v) => svg('line', { x1: x0, x2: x1, y1: y(v), y2: y(v) })));
  chart.labels.replaceChildren(
    ...lines.map((v) =>
      svg('text', { x: x0 - 6, y: y(v) + 4, 'text-anchor': 'end' }, document.createTextNode(format(v))),
    ),
    svg('text', { x: x0, y: H - 4, 'text-anchor': 'start' }, document.createTextNode(`−${span / 60_000} min`)),
    svg('text', { x: x1, y: H - 4, 'text-anchor': 'end' }, document.createTextNode('now')),
  );

  if (points.length === 0) {
    chart.line.setAttribute('d', '');
    chart.area.setAttribute('d', '');
    setText(chart.range, '(no samples yet)');
    return;
  }
  // Connections are a step function (a count holds until it changes); memory a line.
  let d = '';
  points.forEach(([t, v], i) => {
    const px = x(t).toFixed(1);
    const py = y(v).toFixed(1);
    if (i === 0) d = `M${px},${py}`;
    else d += integer ? `H${px}V${py}` : `L${px},${py}`;
  });
  const lastX = x(points.at(-1)[0]).toFixed(1);
  chart.line.setAttribute('d', d);
  chart.area.setAttribute('d', `${d}V${y0}H${x(points[0][0]).toFixed(1)}Z`);
  chart.line.setAttribute('data-last-x', lastX);
  const values = points.map(([, v]) => v);
  setText(
    chart.range,
    `now ${format(values.at(-1))}, min ${format(Math.min(...values))}, max ${format(Math.max(...values))}`,
  );
}

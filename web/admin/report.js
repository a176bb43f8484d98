// System tab, the show report: what happened over a window of time (`GET /report`, from control's
// journal of the show), asked for on demand, not on the refresh. The window is the last hour,
// the last 24 hours, or from–to picked in the browser's local time (sent as RFC 3339, UTC). Show
// writes the JSON as tables: per crew member (joins, leaves with why, drops with how long, talk
// time per line), per group (talk time, who was on it, the most at once), outages, direct lines,
// sessions moved, warnings, and the events the journal missed. Download CSV fetches the same
// window as CSV (with the admin token, so not a plain link) and saves it through a Blob URL.

import { api } from '/admin/api.js';
import { dateTime, duration, h, setText, showError } from '/admin/dom.js';
import { elements, wireForm } from '/admin/tab.js';

const HOUR_MS = 3_600_000;
const SPANS = { hour: HOUR_MS, day: 24 * HOUR_MS };

let ui;
/** The window of the report shown (`{from, to}`, RFC 3339), to name its times by day or not. */
let shown = null;

export function init() {
  ui = elements({
    form: 'report-form',
    span: 'report-window',
    custom: 'report-custom',
    from: 'report-from',
    to: 'report-to',
    show: 'report-show',
    csv: 'report-csv',
    status: 'report-status',
    body: 'report-body',
    error: 'report-error',
  });
  ui.span.addEventListener('change', () => {
    const custom = ui.span.value === 'custom';
    ui.custom.hidden = !custom;
    if (custom && !ui.from.value && !ui.to.value) {
      // Start from the last hour, in local time as the inputs show it.
      const now = Date.now();
      ui.from.value = localInput(now - HOUR_MS);
      ui.to.value = localInput(now);
    }
  });
  wireForm(ui.form, (event) => {
    event.preventDefault();
    showReport();
  });
  ui.csv.addEventListener('click', downloadCsv);
}

export function reset() {
  shown = null;
  ui.body.hidden = true;
  ui.body.replaceChildren();
  setText(ui.status, '');
  showError(ui.error, null);
}

// ---------------------------------------------------------------------------------------------
// The window

/** RFC 3339, UTC, to the second: `from` rounded down, `to` up (the window keeps its last event). */
function rfc3339(ms, up = false) {
  const s = (up ? Math.ceil(ms / 1000) : Math.floor(ms / 1000)) * 1000;
  return new Date(s).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A time as a `datetime-local` input's value (local time, to the second). */
function localInput(ms) {
  const t = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  return (
    `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}` +
    `T${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`
  );
}

/** The window chosen, `{from, to}` in RFC 3339 UTC; throws with what is missing. */
function chosenWindow() {
  const span = SPANS[ui.span.value];
  if (span) {
    const now = Date.now();
    return { from: rfc3339(now - span), to: rfc3339(now, true) };
  }
  // A datetime-local value has no zone: `new Date` reads it as local time.
  const from = new Date(ui.from.value).getTime();
  const to = new Date(ui.to.value).getTime();
  if (Number.isNaN(from)) throw new Error('Pick the start of the window (From).');
  if (Number.isNaN(to)) throw new Error('Pick the end of the window (To).');
  return { from: rfc3339(from), to: rfc3339(to) };
}

const query = ({ from, to }, format) =>
  `/report?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}&format=${format}`;

/** `20260501T180000Z`: an RFC 3339 time fit for a file name (no colons). */
const fileTime = (iso) => iso.replace(/[-:]/g, '').replace(/\.\d+/, '');

// ---------------------------------------------------------------------------------------------
// Show and download

async function showReport() {
  showError(ui.error, null);
  let win;
  try {
    win = chosenWindow();
  } catch (error) {
    showError(ui.error, error.message);
    return;
  }
  ui.show.disabled = true;
  setText(ui.status, 'Reading the journal…');
  try {
    const report = await api('GET', query(win, 'json'));
    render(report);
    setText(ui.status, summary(report));
  } catch (error) {
    setText(ui.status, '');
    showError(ui.error, `Could not load the report: ${error.message}`);
  } finally {
    ui.show.disabled = false;
  }
}

async function downloadCsv() {
  showError(ui.error, null);
  let win;
  try {
    win = chosenWindow();
  } catch (error) {
    showError(ui.error, error.message);
    return;
  }
  ui.csv.disabled = true;
  try {
    const csv = await api('GET', query(win, 'csv'), undefined, { text: true });
    const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
    const link = h('a', {
      href: url,
      download: `partyline-report-${fileTime(win.from)}-${fileTime(win.to)}.csv`,
      hidden: true,
    });
    document.body.append(link);
    link.click();
    link.remove();
    // The download has taken the Blob by now; the URL is let go a little later all the same.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    showError(ui.error, `Could not download the report: ${error.message}`);
  } finally {
    ui.csv.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Rendering

/** A time of the report: the time of day, with the date when the window spans more than a day. */
function when(iso) {
  if (!iso) return '—';
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  const oneDay = shown && new Date(shown.from).toDateString() === new Date(shown.to).toDateString();
  const text = oneDay ? t.toLocaleTimeString() : t.toLocaleString();
  return h('time', { datetime: iso, title: `${dateTime(iso)} (${iso})` }, text);
}

/** How long: "5 min 3 s", "0.4 s" under one, "(still going)" with no end. */
function howLong(seconds, end) {
  const text = seconds < 1 ? `${seconds.toFixed(1)} s` : duration(seconds);
  return end === null || end === undefined ? `${text}, still going at the window's end` : text;
}

/** A cell's list of lines (nothing at all: "—"). */
function list(items) {
  if (!items.length) return '—';
  return h('ul', { class: 'report-list' }, ...items.map((item) => h('li', {}, ...[item].flat())));
}

/** A table of `rows` (arrays of cells) under `headers`, or the `empty` text; `keys` name the rows. */
function table(id, title, headers, rows, { empty, keys = [], classes = [] }) {
  const titleId = `${id}-title`;
  const section = h(
    'section',
    { class: 'report-section', 'aria-labelledby': titleId },
    h('h3', { id: titleId }, title),
  );
  if (!rows.length) {
    section.append(h('p', { id: `${id}-empty`, class: 'muted small' }, empty));
    return section;
  }
  section.append(
    h(
      'div',
      { class: 'table-box' },
      h(
        'table',
        { class: 'rows report-table' },
        h('thead', {}, h('tr', {}, ...headers.map((header) => h('th', { scope: 'col' }, header)))),
        h(
          'tbody',
          { id },
          ...rows.map((cells, i) =>
            h(
              'tr',
              { dataset: keys[i] === undefined ? {} : { key: keys[i] } },
              ...cells.map((cell, c) =>
                h('td', { class: classes[c], dataset: { label: headers[c] } }, ...[cell].flat()),
              ),
            ),
          ),
        ),
      ),
    ),
  );
  return section;
}

function render(report) {
  shown = { from: report.from, to: report.to };
  const members = report.members.map((m) => [
    h('strong', {}, m.username),
    list(m.joins.map((j) => [when(j.time), ` on ${j.group}`])),
    list(m.leaves.map((l) => [when(l.time), ` from ${l.group}: ${l.why}`])),
    list(
      m.drops.map((d) => [
        when(d.start),
        ` ${d.kind === 'rejoin' ? 'left and rejoined' : 'link'} on ${d.group} for ${howLong(d.durationS, d.end)}`,
        d.detail ? ` (${d.detail})` : '',
      ]),
    ),
    list([
      ...Object.entries(m.talkSeconds).map(([line, s]) => `${line}: ${howLong(s, 0)}`),
      ...(Object.keys(m.talkSeconds).length > 1 ? [`in all: ${howLong(m.talkSecondsTotal, 0)}`] : []),
    ]),
  ]);
  const groups = report.groups.map((g) => [
    h('strong', {}, g.group),
    howLong(g.talkSeconds, 0),
    g.members.join(', ') || '—',
    g.peakAt ? [`${g.peakMembers} at `, when(g.peakAt)] : String(g.peakMembers),
  ]);
  const outages = report.outages.map((o) => [
    o.service,
    o.state,
    when(o.start),
    howLong(o.durationS, o.end),
    o.message || '—',
  ]);
  const directLines = report.directLines.map((d) => [
    `${d.caller} → ${d.callee}`,
    when(d.start),
    howLong(d.durationS, d.end),
    d.why ?? '—',
  ]);
  const moves = report.sessionsMoved.map((m) => [when(m.time), m.username, m.node]);
  const warnings = report.warnings.map((w) => [when(w.time), w.level, w.source, w.message]);

  const notes = [];
  if (report.lostEvents > 0) {
    notes.push(`The journal missed ${report.lostEvents} event(s) in this window: the report lacks them.`);
  }
  if (report.unreadableLines > 0) {
    notes.push(`${report.unreadableLines} line(s) of the journal could not be read (cut short by a crash): left out.`);
  }
  if (report.controlStarts.length) {
    notes.push(['Control (re)started at ', ...report.controlStarts.flatMap((t, i) => [i ? ', ' : '', when(t)]), '.']);
  }

  ui.body.replaceChildren(
    ...notes.map((note) => h('p', { class: 'message report-note' }, ...[note].flat())),
    table('report-members', 'Crew', ['Member', 'Joins', 'Leaves', 'Drops', 'Talk time'], members, {
      empty: 'Nobody was on a line in this window.',
      keys: report.members.map((m) => m.username),
      classes: ['report-member', 'report-joins', 'report-leaves', 'report-drops', 'report-talk'],
    }),
    table('report-groups', 'Groups', ['Group', 'Talk time', 'Members seen', 'Most at once'], groups, {
      empty: 'No group had anyone on it in this window.',
      keys: report.groups.map((g) => g.group),
    }),
    table('report-outages', 'Outages', ['Service', 'State', 'Start', 'Duration', 'Message'], outages, {
      empty: 'No outages.',
    }),
    table('report-direct', 'Direct lines', ['Call', 'Start', 'Duration', 'Closed'], directLines, {
      empty: 'No direct lines.',
    }),
    table('report-moves', 'Sessions moved off a lost node', ['Time', 'Member', 'Node left'], moves, {
      empty: 'No sessions moved.',
    }),
    table('report-warnings', 'Warnings and errors', ['Time', 'Level', 'Source', 'Message'], warnings, {
      empty: 'No warnings.',
    }),
  );
  ui.body.hidden = false;
}

function summary(report) {
  const n = (count, one, many) => `${count} ${count === 1 ? one : many}`;
  return (
    `${dateTime(report.from)} to ${dateTime(report.to)}: ` +
    `${n(report.members.length, 'crew member', 'crew members')}, ${n(report.groups.length, 'group', 'groups')}, ` +
    `${n(report.outages.length, 'outage', 'outages')}, ${n(report.warnings.length, 'warning', 'warnings')}, ` +
    `${n(report.lostEvents, 'event', 'events')} lost.`
  );
}

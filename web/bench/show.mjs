// The Show tab's benchmark (BENCHMARKS.md, "The admin's Show tab"), run by bench/show inside a
// network namespace of its own (scripts/netns-run), with the browser tests' harness
// (../tests/harness.mjs): the real partyline-control and Janus, MEMBERS members of the headless
// crew (partyline-crew, CREWS processes, each its share of the members on a line of its own,
// talking in turns of TURN s), and the admin's Show tab in headless Chromium. Once every member
// is a row of the grid (or JOIN_SECS have passed: the count joined is said), for WINDOW_SECS:
//
//   event → light   for each `talking` event of the admin event stream, from its arrival in the
//                   page (the stream's bytes handed to the page's reader, tapped by a wrapper of
//                   `fetch`) to the frame that paints its cell lit (a MutationObserver sees the
//                   cell's `data-talking`, then requestAnimationFrame, then a message posted from
//                   it: the task after that frame's paint); p50, p95, p99, max
//   main thread     the page's main-thread busy share: CDP `Performance.getMetrics` TaskDuration
//                   over the window, and the long tasks (≥ 50 ms) a PerformanceObserver saw
//   CPU             Janus's, control's, the crew's and Chromium's (its whole process tree), and the
//                   machine's, from /proc over the window
//
//   node web/bench/show.mjs [--quick]
//
// Prints a markdown section on stdout, progress on stderr; exits 1 when a target is missed
// (event to light p95 ≥ 100 ms, main thread ≥ 20 % of a core) or nothing was measured.
// Environment: MEMBERS (200; 20 with --quick), CREWS (4), TURN (2), WINDOW_SECS (60; 15 with
// --quick), RAMP (30), JOIN_SECS (180), PARTYLINE_CONTROL_BIN and PARTYLINE_CREW_BIN (bench/show
// sets the release builds).

import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Control, DESKTOP_VIEWPORT, iceAddress, launchBrowser, logIn, waitFor } from '../tests/harness.mjs';
import {
  CpuWindow,
  TICKS_PER_SECOND,
  children,
  commandLine,
  loadAverage,
  processTree,
  threadTicks,
} from './system.mjs';

const QUICK = process.argv.includes('--quick');
const number = (name, normal, quick = normal) => Number(process.env[name] ?? (QUICK ? quick : normal));
const MEMBERS = number('MEMBERS', 200, 20);
const CREWS = number('CREWS', 4);
const TURN = number('TURN', 2);
const WINDOW_SECS = number('WINDOW_SECS', 60, 15);
const RAMP = number('RAMP', 30, 5);
const JOIN_SECS = number('JOIN_SECS', 180, 60);
const CREW_BIN = process.env.PARTYLINE_CREW_BIN;
/** PROFILE=1: the page's script profiled over the window, its busiest functions on stderr. */
const PROFILE = process.env.PROFILE === '1';
/**
 * The rooms' settings (control's `audio:` keys, `KEY=VALUE,…`; empty: control's defaults): by
 * default cheaper still than the cheapest of bench/capacity's A/B (8 kHz), so that one Janus
 * mixes 200 members beside Chromium and the crew on two cores; the page's work does not depend
 * on them (a run here at 16 kHz: Janus over a core, and most talks came as a start and a stop
 * within a frame).
 */
const AUDIO = (process.env.AUDIO ?? 'opusComplexity=1,sampleRate=8000,defaultBitrate=16')
  .split(',')
  .filter(Boolean)
  .map((kv) => kv.split('='));
/** The issue's targets: event to light under 100 ms p95, the main thread under 20 % of a core. */
const LIGHT_P95_MS = 100;
const MAIN_THREAD_PERCENT = 20;
const LINES = ['Stage', 'Sound', 'Lighting', 'Video'];
/** Settling after the last row came: the joins' refetches and the first talks done. */
const SETTLE_MS = 5_000;

const log = (...parts) => console.error('bench/show:', ...parts);
const out = [];
const md = (line = '') => out.push(line);
const fmt = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : '–');
const quantile = (sorted, q) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;

/**
 * Runs in the admin page before its scripts: taps the admin event stream (each `talking` event's
 * arrival, by `identity␤groupId`), stamps each cell's light at the task after its frame's paint,
 * and counts long tasks. Only while `__bench.recording`.
 */
function instrument() {
  const unlit = { 'over before a frame': 0, 'no row': 0, 'lit already': 0, dark: 0 };
  const bench = { recording: false, arrivals: new Map(), samples: [], events: 0, unlit, longTasks: [], users: [] };
  window.__bench = bench;
  /**
   * Why the cell of `key` did not light for its event: the talk's `stoppedTalking` came within a
   * frame of it (the light may be on and off before a frame paints it),
   * no row for the member, lit already, or none of those (dark: a miss of the page's).
   */
  bench.unlitBecause = (key) => {
    if (bench.arrivals.get(key)?.stopped) {
      unlit['over before a frame'] += 1;
      return;
    }
    const [identity, line] = key.split('\n');
    const cell = document.querySelector(
      `#show-rows tr[data-key="${CSS.escape(identity)}"] td[data-key="${CSS.escape(line)}"]`,
    );
    unlit[!cell ? 'no row' : cell.hasAttribute('data-talking') ? 'lit already' : 'dark'] += 1;
  };
  const original = window.fetch;
  window.fetch = async (...args) => {
    const url = String(args[0]?.url ?? args[0]);
    const started = performance.now();
    const users = url.includes('/api/admin/users') && bench.recording;
    let response;
    try {
      response = await original(...args);
    } catch (error) {
      if (users) bench.users.push({ ms: performance.now() - started, ok: false });
      throw error;
    }
    // The users list as the page's refresh fetches it: to its head, and its body read.
    if (users) {
      const copy = response.clone();
      copy.text().then(
        () => bench.users.push({ ms: performance.now() - started, ok: response.ok }),
        () => bench.users.push({ ms: performance.now() - started, ok: false }),
      );
    }
    if (!url.includes('/api/admin/events') || !response.body) return response;
    const decoder = new TextDecoder();
    let text = '';
    const tap = new TransformStream({
      transform(chunk, controller) {
        const at = performance.now();
        text += decoder.decode(chunk, { stream: true }).replaceAll('\r\n', '\n');
        let end;
        while ((end = text.indexOf('\n\n')) >= 0) {
          const lines = text.slice(0, end).split('\n');
          text = text.slice(end + 2);
          const talk = lines.includes('event: talking');
          if (!talk && !lines.includes('event: stoppedTalking')) continue;
          const data = JSON.parse(lines.find((line) => line.startsWith('data:')).slice(5));
          const key = `${data.identity}\n${data.groupId}`;
          const pending = bench.arrivals.get(key);
          if (!talk) {
            // Within a frame of its start: the page may write both before painting.
            if (pending && at - pending.at < 1000 / 60) pending.stopped = true;
            continue;
          }
          if (!bench.recording) continue;
          bench.events += 1;
          if (pending) bench.unlitBecause(key); // its last talk never lit
          bench.arrivals.set(key, { at, stopped: false });
        }
        controller.enqueue(chunk);
      },
    });
    const { status, statusText, headers } = response;
    return new Response(response.body.pipeThrough(tap), { status, statusText, headers });
  };
  document.addEventListener('DOMContentLoaded', () => {
    new MutationObserver((changes) => {
      for (const { target } of changes) {
        if (!target.hasAttribute('data-talking')) continue;
        const key = `${target.parentElement.dataset.key}\n${target.dataset.key}`;
        const arrived = bench.arrivals.get(key)?.at;
        if (arrived === undefined) continue;
        bench.arrivals.delete(key);
        requestAnimationFrame(() => {
          const channel = new MessageChannel();
          channel.port1.onmessage = () => bench.samples.push(performance.now() - arrived);
          channel.port2.postMessage(null);
        });
      }
    }).observe(document.getElementById('show-rows'), {
      subtree: true,
      attributes: true,
      attributeFilter: ['data-talking'],
    });
  });
  new PerformanceObserver((list) => {
    if (bench.recording) for (const entry of list.getEntries()) bench.longTasks.push(entry.duration);
  }).observe({ type: 'longtask' });
}

/**
 * CPU ticks of every renderer's main thread under `root`, by pid: the thread whose id is its
 * process's (Chromium leaves the main thread its process's name, not `CrRendererMain`).
 */
function rendererMainTicks(root) {
  const ticks = new Map();
  for (const pid of processTree(root)) {
    if (!commandLine(pid).includes('--type=renderer')) continue;
    const main = threadTicks(pid, pid);
    if (main !== null) ticks.set(pid, main); // null: gone
  }
  return ticks;
}

/** The busiest renderer main thread's CPU between two `rendererMainTicks`, % of a core. */
function busiestMainThread(before, after, seconds) {
  let most = 0;
  for (const [thread, ticks] of after) {
    if (before.has(thread)) most = Math.max(most, ticks - before.get(thread));
  }
  return (most / TICKS_PER_SECOND / seconds) * 100;
}

/** The functions the page's script spent most time in (self time), on stderr: where to look. */
function logProfile({ nodes, samples, timeDeltas }) {
  const self = new Map(nodes.map((n) => [n.id, 0]));
  samples.forEach((id, i) => self.set(id, self.get(id) + (timeDeltas[i] ?? 0)));
  const byName = new Map();
  for (const n of nodes) {
    const { functionName, url, lineNumber } = n.callFrame;
    const name = `${functionName || '(anonymous)'} ${url.split('/').pop()}:${lineNumber + 1}`;
    byName.set(name, (byName.get(name) ?? 0) + self.get(n.id));
  }
  const top = [...byName].sort((a, b) => b[1] - a[1]).slice(0, 25);
  log(`profile, self ms:\n${top.map(([name, us]) => `${fmt(us / 1000)}  ${name}`).join('\n')}`);
}

/**
 * Puts AUDIO into control's config file and reloads it (SIGHUP); resolves once control shows
 * them and, for a sample rate, once Janus's rooms have been made again at it.
 */
async function setRooms(control) {
  if (!AUDIO.length) return;
  const path = join(control.dir, 'partyline.yaml');
  const keys = AUDIO.map(([key, value]) => `  ${key}: ${value}\n`).join('');
  const text = await readFile(path, 'utf8');
  await writeFile(path, text.replace('audio:\n', `audio:\n${keys}`), { mode: 0o600 });
  process.kill(control.process.pid, 'SIGHUP');
  await waitFor('the config reloaded', async () => {
    const { body } = await control.admin('GET', '/config');
    return AUDIO.every(([key, value]) => String(body.audio?.[key]) === value);
  });
  const rate = Object.fromEntries(AUDIO).sampleRate;
  if (!rate) return;
  const probe = await control.janus.probe();
  try {
    await waitFor(
      `the rooms at ${rate} Hz`,
      async () => {
        const { list } = await probe.call({ request: 'list' });
        return list.length === LINES.length && list.every((room) => String(room.sampling_rate) === rate);
      },
      { timeout: 30_000, interval: 500 },
    );
  } finally {
    await probe.close();
  }
}

/** The crew: CREWS processes, each its share of the members on a line of its own. */
function startCrew(control) {
  const lines = LINES.slice(0, CREWS).map((name) => name.toLowerCase());
  return lines.map((line, i) => {
    const users = Math.floor(MEMBERS / lines.length) + (i < MEMBERS % lines.length ? 1 : 0);
    const args = [
      ['--server', control.origin.replace(/\/$/, '')],
      ['--users', String(users)],
      ['--listen', line],
      ['--talk', line],
      ['--name-prefix', line],
      ['--ramp', String(RAMP)],
      ['--duration', String(JOIN_SECS + WINDOW_SECS + 60)],
      ['--turn', String(TURN)],
      ['--media-address', iceAddress()],
    ].flat();
    const crew = spawn(CREW_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    crew.log = [];
    crew.stderr.setEncoding('utf8');
    crew.stderr.on('data', (text) => crew.log.push(...text.trimEnd().split('\n')));
    return crew;
  });
}

async function main() {
  if (!CREW_BIN) throw new Error('PARTYLINE_CREW_BIN: the release partyline-crew (bench/show sets it)');
  const loadAtStart = loadAverage();
  const control = await Control.start(LINES, {
    // One node that takes every member: the pool's default capacity (64) is not under test.
    nodes: [{ name: 'local', capacity: MEMBERS + 100 }],
    config: ['crew:', '  tokensPerMinute: 100000', '  maxPendingTokens: 5000', '  maxPendingPerAddress: 5000'],
  });
  await setRooms(control);
  const before = new Set(children(process.pid));
  const browser = await launchBrowser();
  const chromium = children(process.pid).find((p) => !before.has(p));
  let crews = [];
  try {
    const context = await browser.newContext({ viewport: DESKTOP_VIEWPORT });
    await context.addInitScript(instrument);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${control.origin}/admin`);
    await logIn(page, control.adminToken);
    await page.locator('#app').waitFor({ state: 'visible' });
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');

    log(`${MEMBERS} members in ${CREWS} crews, turns of ${TURN} s`);
    const t0 = Date.now();
    crews = startCrew(control);
    const rows = page.locator('#show-rows tr');
    let joined = 0;
    await waitFor(
      `${MEMBERS} rows`,
      async () => {
        joined = await rows.count();
        return joined >= MEMBERS;
      },
      { timeout: JOIN_SECS * 1000, interval: 1000 },
    ).catch(() => {
      log(`only ${joined} rows after ${JOIN_SECS} s: measuring those; the crews' last lines:`);
      for (const crew of crews) log(crew.log.slice(-5).join('\n'));
    });
    const joinSecs = (Date.now() - t0) / 1000;
    log(`${joined} rows after ${fmt(joinSecs)} s; settling`);
    await sleep(SETTLE_MS);

    const janus = await control.janus.pid();
    const cpu = new CpuWindow({
      janus: () => processTree(janus),
      control: () => [control.process.pid],
      crew: () => crews.map((c) => c.pid),
      chromium: () => processTree(chromium),
    });
    /** The renderer's main-thread seconds so far: in tasks, and of those in script, style, layout. */
    const metrics = async () => {
      const { metrics: list } = await cdp.send('Performance.getMetrics');
      const get = (name) => list.find((m) => m.name === name)?.value ?? NaN;
      return ['TaskDuration', 'ScriptDuration', 'RecalcStyleDuration', 'LayoutDuration'].map(get);
    };
    if (PROFILE) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.start');
    }
    const metrics0 = await metrics();
    const mainTicks0 = rendererMainTicks(chromium);
    const wall0 = performance.now();
    await page.evaluate(() => {
      window.__bench.recording = true;
    });
    await sleep(WINDOW_SECS * 1000);
    await page.evaluate(() => {
      window.__bench.recording = false;
    });
    const seconds = (performance.now() - wall0) / 1000;
    const mainCpu = busiestMainThread(mainTicks0, rendererMainTicks(chromium), seconds);
    const [mainThread, script, style, layout] = (await metrics()).map((v, i) => (v - metrics0[i]) / seconds);
    const usage = cpu.stop();
    if (PROFILE) logProfile((await cdp.send('Profiler.stop')).profile);
    // The lights of the window's last events, painted after it.
    await sleep(LIGHT_P95_MS * 10);
    const bench = await page.evaluate(() => {
      const { samples, events, unlit, arrivals, longTasks, unlitBecause, users } = window.__bench;
      for (const key of arrivals.keys()) unlitBecause(key);
      return { samples, events, unlit, longTasks, users };
    });
    const unlit = Object.values(bench.unlit).reduce((a, b) => a + b, 0);
    const unlitWhy = Object.entries(bench.unlit)
      .filter(([, n]) => n)
      .map(([why, n]) => `${n} ${why}`)
      .join(', ');
    const rowsAtEnd = await rows.count();
    const lit = [...bench.samples].sort((a, b) => a - b);

    const p95 = quantile(lit, 0.95);
    const mainPercent = mainThread * 100;
    md(`## The admin's Show tab with ${joined} members talking in turns (\`bench/show\`)`);
    md();
    md(`Chromium ${process.env.CHROMIUM_VERSION ?? 'unknown'}; load average at the start: ${loadAtStart}.`);
    md();
    md(
      `${joined} of ${MEMBERS} members of the headless crew (${CREWS} processes, each its share on a line of its own, ` +
        `talking in turns of ${TURN} s: ${CREWS} talkers at a time) were rows of the Show grid ${fmt(joinSecs)} s after ` +
        `the crew started (${LINES.length} lines, ${joined * LINES.length} cells); then ${WINDOW_SECS} s measured ` +
        `in headless Chromium at 1280 px (${rowsAtEnd} rows at the end).`,
    );
    md();
    md('| figure | measured | target |');
    md('|---|---|---|');
    md(
      `| \`talking\` events in the window: lit / never lit | ${bench.events}: ${lit.length} / ${unlit}${unlitWhy ? ` (${unlitWhy})` : ''} | none dark |`,
    );
    md(
      `| event → light painted ms, p50 / p95 / p99 / max | ${fmt(quantile(lit, 0.5))} / ${fmt(p95)} / ${fmt(quantile(lit, 0.99))} / ${fmt(lit.at(-1))} | p95 < ${LIGHT_P95_MS} |`,
    );
    md(
      `| the page's main thread's CPU (its renderer's main thread), % of a core | ${fmt(mainCpu)} | < ${MAIN_THREAD_PERCENT} |`,
    );
    md(
      `| its time in tasks (TaskDuration; a busy machine's waits included), % of the window: all (script, style, layout) | ${fmt(mainPercent)} (${fmt(script * 100)}, ${fmt(style * 100)}, ${fmt(layout * 100)}) | |`,
    );
    const fetched = bench.users
      .filter((u) => u.ok)
      .map((u) => u.ms)
      .sort((a, b) => a - b);
    md(
      `| the page's fetches of \`GET /api/admin/users\` (its 3 s refresh, and at joins and leaves): answered / failed, ms median / max | ${fetched.length} / ${bench.users.length - fetched.length}, ${fmt(quantile(fetched, 0.5))} / ${fmt(fetched.at(-1))} | |`,
    );
    md(
      `| long tasks (≥ 50 ms): count, total ms, longest ms | ${bench.longTasks.length}, ${fmt(
        bench.longTasks.reduce((a, b) => a + b, 0),
        0,
      )}, ${fmt(Math.max(0, ...bench.longTasks), 0)} | |`,
    );
    md(
      `| CPU % of one core: Chromium (every process), Janus, control, the crew | ${fmt(usage.groups.chromium)}, ${fmt(usage.groups.janus)}, ${fmt(usage.groups.control)}, ${fmt(usage.groups.crew)} | |`,
    );
    md(
      `| the machine: busy, of which this benchmark, everything else (% of ${usage.cpus * 100}) | ${fmt(usage.machine)}: ${fmt(usage.own)}, ${fmt(usage.others)} | |`,
    );
    md();
    const met =
      lit.length > 0 && p95 < LIGHT_P95_MS && mainCpu < MAIN_THREAD_PERCENT && !bench.unlit.dark && !errors.length;
    const short =
      joined < MEMBERS ? ` Only ${joined} of ${MEMBERS} members joined: the figures are for ${joined}.` : '';
    md(`Verdict: ${met ? 'both targets met' : 'a target missed (or nothing measured)'}.${short}`);
    if (errors.length) md(`Page errors: ${errors.join('; ')}`);
    console.log(out.join('\n'));
    return met;
  } finally {
    for (const crew of crews) crew.kill('SIGTERM');
    await browser.close();
    await control.stop();
  }
}

main().then(
  (met) => process.exit(met ? 0 : 1),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);

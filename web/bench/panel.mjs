// The crew panel's benchmark (BENCHMARKS.md, "Crew panel"), run by bench/panel inside a network
// namespace of its own (scripts/netns-run), with the browser tests' harness (../tests/harness.mjs):
//
//   latency    mouth-to-ear through one room: a browser's bursts to another browser and to the
//              card's output (through bridged), ticks on the card's input to a browser; onsets
//              measured in the pages (an AudioWorklet's 1 ms envelope) and on the card
//   engines    browser → room → browser on each media engine, Janus's rooms then partyline's own
//              (bridged), a fresh stack each, ENGINE_ROUNDS times in turn (only when named)
//   network    the namespace's link (pl0) down for DOWN_SECS, then up: the time from link up to
//              audio on every line of a 4-line panel, TRIES times
//   capacity   panel users with 4 lines each (one browser context each, in one Chromium) added
//              STEP_USERS at a time, until a listener on one of the lines hears a steady talker
//              drop out; Janus's and Chromium's CPU at every step; once with everything sharing
//              both CPUs, once with the users' Chromium confined to CPU 0 (CAPACITY_SERIES)
//   remote     a control surface's key press through the panel key (`/api/panel/{key}`): from the
//              request to audio heard in another browser (BURSTS presses), and from the request to
//              the panel showing it applied (COMMANDS commands)
//   cost       the headless crew's CPU per line against Chromium's: COST_USERS four-line users
//              in Chromium, then as many partyline-crew members (PARTYLINE_CREW_BIN), same stack
//   keys       a producer's talk to a presenter's IFB on the card (BURSTS browser bursts and
//              DIM_TICKS card-input ticks → the IFB output, beside a plain output), a program
//              line's dim on a listener's panel (each tick first heard → dimmed), and a person
//              key's press → heard against a line's talk key's (PRESSES each)
//   streams    WHIP client → panel, panel → WHEP player, against panel → panel (BURSTS each)
//   offsite    a panel behind a NAT → a panel at the venue, through the TURN relay over TLS and
//              straight (BURSTS each)
//
//   node web/bench/panel.mjs [--quick] [latency] [engines] [network] [capacity] [remote] [cost] [keys] [streams] [offsite]
//
// Prints a markdown section on stdout, progress on stderr. Environment: BURSTS (30), DIM_TICKS (15), PRESSES (20), COMMANDS (200), TRIES (20),
// DOWN_SECS ("5 15": one series each), STEP_USERS (2), MAX_USERS (40), WINDOW_SECS (10), COST_USERS (4),
// CAPACITY_SERIES ("shared confined"); PARTYLINE_CONTROL_BIN and PARTYLINE_BRIDGED_BIN
// (bench/panel sets the release builds).

import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  Control,
  Person,
  bundleForPage,
  epochMs,
  iceAddress,
  launchBrowser,
  setLink,
  waitFor,
  writeBursts,
  writeTone,
} from '../tests/harness.mjs';
import { OffSiteNet, VENUE, relayConfig, startRelay } from '../tests/offsite.mjs';
import { INSTRUMENTED, inboundStats, readEnvelope, startEnvelope } from './pages.mjs';
import { CpuWindow, children, loadAverage, processTree, threadIds } from './system.mjs';

const run = promisify(execFile);
const QUICK = process.argv.includes('--quick');
const number = (name, normal, quick) => Number(process.env[name] ?? (QUICK ? quick : normal));
const BURSTS = number('BURSTS', 30, 6);
const COMMANDS = number('COMMANDS', 200, 20);
const TRIES = number('TRIES', 20, 3);
/** The network part's outages: within the panel's 5 s ICE grace (ICE recovers), and beyond it (a rejoin). */
const DOWN_SECS = (process.env.DOWN_SECS ?? (QUICK ? '5' : '5 15')).split(/\s+/).filter(Boolean).map(Number);
const STEP_USERS = number('STEP_USERS', 2, 2);
const MAX_USERS = number('MAX_USERS', 40, 4);
const WINDOW_SECS = number('WINDOW_SECS', 10, 5);
const COST_USERS = number('COST_USERS', 4, 2);
/** The `engines` part's rounds, each engine once per round. */
const ENGINE_ROUNDS = number('ENGINE_ROUNDS', 3, 1);
/** The headless crew's binary (bench/panel builds it), for the `cost` part. */
const CREW_BIN = process.env.PARTYLINE_CREW_BIN;
/** The capacity series: `shared` (everything on both CPUs), `confined` (the users' Chromium on CPU 0 at nice 19). */
const CAPACITY_SERIES = (process.env.CAPACITY_SERIES ?? 'shared confined').split(/\s+/).filter(Boolean);

/** An onset: a 1 ms window over this after at least ONSET_QUIET_MS under it. */
const ONSET_DB = -50;
const ONSET_QUIET_MS = 300;
/** A burst not heard within this is lost (bursts come every BURST_EVERY_MS). */
const HEARD_WITHIN_MS = 900;
/** A line is heard (data-level-in) over this; the tests' threshold. */
const SOUND_DB = -50;
/** A dropout: at least this many 1 ms windows under DROP_DB while a steady tone plays. */
const DROPOUT_MS = 10;
const DROP_DB = -60;
/**
 * Bursts come about every second, but not every 1,000 ms: Janus mixes every 20 ms, and bursts a
 * whole number of its ticks apart would all meet it at one phase.
 */
const BURST_EVERY_MS = 1007;
/** The card's input for the card → browser path: a 20 ms tick of 1 kHz every BURST_EVERY_MS. */
const TICKS = `audiotestsrc wave=ticks freq=1000 sine-periods-per-tick=20 tick-interval=${BURST_EVERY_MS * 1e6} is-live=true`;

// The harness reports page errors on stdout; stdout is this benchmark's markdown.
console.log = (...parts) => console.error(...parts);
const progress = (...parts) => console.error('bench/panel:', ...parts);
const out = [];
const md = (line = '') => out.push(line);

// ---------------------------------------------------------------------------------------------
// Figures

const sorted = (values) => values.filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
/** The `q` quantile by nearest rank. */
const quantile = (values, q) => {
  const s = sorted(values);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] : null;
};
const fmt = (v, digits = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits));
const stats = (values) => {
  const s = sorted(values);
  return {
    n: s.length,
    median: quantile(s, 0.5),
    p95: quantile(s, 0.95),
    p99: quantile(s, 0.99),
    min: s[0] ?? null,
    max: s.at(-1) ?? null,
  };
};
const cpuLine = (u) =>
  `the machine ${fmt(u.machine)} % busy of ${u.cpus * 100} % over ${fmt(u.seconds)} s: this benchmark ${fmt(u.own)} %, everything else ${fmt(u.others)} %`;

/** Onsets in an envelope (`{ startMs, db }`): their wall-clock times. */
function onsets({ startMs, db }) {
  const found = [];
  let quiet = 0; // a sound already on at the start is not an onset
  db.forEach((v, i) => {
    if (v > ONSET_DB) {
      if (quiet >= ONSET_QUIET_MS) found.push(startMs + i);
      quiet = 0;
    } else {
      quiet += 1;
    }
  });
  return found;
}

/**
 * Each source onset's delay to the first onset heard after it (within HEARD_WITHIN_MS), null
 * when none; sources too late for the heard envelope (`heardUntil`) are left out.
 */
function delays(sources, heard, heardUntil) {
  return sources
    .filter((s) => s + HEARD_WITHIN_MS < heardUntil)
    .map((s) => {
      const h = heard.find((t) => t > s && t < s + HEARD_WITHIN_MS);
      return h === undefined ? null : h - s;
    });
}
const endOf = ({ startMs, db }) => startMs + db.length;

/** Dropouts of a steady tone in an envelope: runs of at least DROPOUT_MS windows under DROP_DB. */
function dropouts({ db }) {
  const runs = [];
  let run = 0;
  const first = db.findIndex((v) => v > DROP_DB);
  for (const v of db.slice(Math.max(0, first))) {
    if (v <= DROP_DB) {
      run += 1;
    } else {
      if (run >= DROPOUT_MS) runs.push(run);
      run = 0;
    }
  }
  if (run >= DROPOUT_MS) runs.push(run);
  return { count: runs.length, longest: Math.max(0, ...runs), median: quantile(db, 0.5) };
}

// ---------------------------------------------------------------------------------------------
// The parts

async function withTemp(body) {
  const dir = await mkdtemp(join(tmpdir(), 'bench-'));
  try {
    return await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Opens `name` on `path` (a preset link) in `browser` and joins; resolves once connected. */
async function panel(browser, control, name, path, options = {}) {
  const p = await Person.open(browser, control.origin, name, { path, ...options });
  await p.joinPreset();
  await p.waitState('connected', 60_000);
  return p;
}

/** launchBrowser, and the process id of that Chromium (Playwright's Browser does not say it). */
async function launch(options) {
  const before = new Set(children(process.pid));
  const browser = await launchBrowser(options);
  const [pid] = children(process.pid).filter((p) => !before.has(p));
  return { browser, pid };
}

async function latchAll(p, lines) {
  for (const line of lines) {
    await p.control(line, 'talk').click();
    await p.waitLine(line, 'talk', 'latched');
  }
}

/** Every line of `p` heard over SOUND_DB (bounded). */
const hearsAll = (p, lines, timeout = 15_000) =>
  waitFor(
    `${p.name} hearing ${lines}`,
    async () => {
      const levels = await Promise.all(lines.map((line) => p.lineLevel(line)));
      return levels.every((db) => db > SOUND_DB);
    },
    { timeout, interval: 50 },
  );

/**
 * Waits until the card's output (`recording`, channel 0) carries the talker's bursts; while it
 * stays silent, removes the server audio user `desk` and adds it again, which rebuilds bridged's
 * card side (web/tests/README.md: on a busy machine bridged's playback can stay silent, stuck in
 * clock-skew corrections). Returns how many rebuilds it took (null: still silent after 3).
 */
async function cardOutputCarries(control, recording, desk) {
  for (let rebuilds = 0; rebuilds <= 3; rebuilds += 1) {
    const from = recording.seconds;
    await sleep(3 * BURST_EVERY_MS);
    if (onsets(recording.envelope(0, from)).length >= 2) return rebuilds;
    if (rebuilds === 3) break;
    progress("latency: the card's output is silent: the server audio user again (bridged rebuilds its card side)");
    const { status } = await control.admin('DELETE', '/server-users/desk');
    if (status !== 200 && status !== 204) throw new Error(`DELETE /api/admin/server-users/desk: ${status}`);
    await waitFor(
      'the server audio user gone from bridged',
      async () => ((await control.bridge()).branches ?? []).length === 0,
      { timeout: 15_000 },
    );
    await control.addServerUser(desk);
    await sleep(2000); // the card side's first seconds
  }
  return null;
}

/**
 * Control with the card and `groups`, a talker's Chromium whose microphone plays 80 ms bursts of
 * 1 kHz every BURST_EVERY_MS, a listener's Chromium, and both sides of the card recorded from the
 * start (null sinks read at low latency render in small blocks); runs `body` with them, then
 * stops everything.
 */
async function withBurstStack(groups, body) {
  await withTemp(async (dir) => {
    const control = await Control.start(groups, { card: true });
    const browsers = [];
    const recordings = [];
    try {
      const bursts = await writeBursts(join(dir, 'bursts.wav'), 1000, {
        burstMs: 80,
        everyMs: BURST_EVERY_MS,
        seconds: (BURST_EVERY_MS * 10) / 1000,
      });
      browsers.push(await launchBrowser({ audioFile: bursts }), await launchBrowser());
      recordings.push(await control.card.record('card_out.monitor'), await control.card.record('card_in.monitor'));
      const [talkBrowser, listenBrowser] = browsers;
      const [cardOut, cardIn] = recordings;
      await body({ control, talkBrowser, listenBrowser, cardOut, cardIn });
    } finally {
      await Promise.all(recordings.map((r) => r.stop()));
      await Promise.all(browsers.map((b) => b.close()));
      await control.stop();
    }
  });
}

async function latency() {
  const X = 'bench';
  const desk = { name: 'Desk', group: X, inputChannel: 0, outputChannel: 0 };
  md('### Mouth-to-ear (`latency`)');
  md();
  await withBurstStack(['Bench'], async ({ control, talkBrowser, listenBrowser, cardOut, cardIn }) => {
    await control.addServerUser(desk);
    const a = await panel(talkBrowser, control, 'Talker', `/?groups=${X}`, INSTRUMENTED);
    const b = await panel(listenBrowser, control, 'Listener', `/?groups=${X}&talk=`, INSTRUMENTED);
    await sleep(2000); // the card side's first seconds

    // Browser → room → browser and → card: the talker's bursts.
    const cpu = new CpuWindow();
    await latchAll(a, [X]);
    const rebuilds = await cardOutputCarries(control, cardOut, desk);
    await startEnvelope(a.page, 'mouth', null);
    await startEnvelope(b.page, 'ear', X);
    const from = cardOut.seconds;
    progress(`latency: ${BURSTS} bursts from the talker`);
    await sleep((BURSTS + 1) * BURST_EVERY_MS);
    const [mouth, ear] = [await readEnvelope(a.page, 'mouth'), await readEnvelope(b.page, 'ear')];
    const card = cardOut.envelope(0, from);
    await a.control(X, 'talk').click();
    await a.waitLine(X, 'talk', 'off');
    const browserToBrowser = delays(onsets(mouth), onsets(ear), endOf(ear));
    const browserToCard = delays(onsets(mouth), onsets(card), endOf(card));

    // Card → room → browser: ticks on the card's input 0.
    await sleep(1000);
    const ticks = await control.card.play(TICKS, [0]);
    const inFrom = cardIn.seconds;
    await readEnvelope(b.page, 'ear', { clear: true });
    progress(`latency: ${BURSTS} ticks on the card's input`);
    await sleep((BURSTS + 1) * BURST_EVERY_MS);
    const [input, heard] = [cardIn.envelope(0, inFrom), await readEnvelope(b.page, 'ear')];
    await ticks.stop();
    const cardToBrowser = delays(onsets(input), onsets(heard), endOf(heard));
    const usage = cpu.stop();

    md('| path | median ms | p95 ms | min | max | onsets matched |');
    md('|---|---|---|---|---|---|');
    for (const [path, values] of [
      ['browser → room → browser', browserToBrowser],
      ['card → room → browser (bridged)', cardToBrowser],
      ['browser → room → card (bridged)', browserToCard],
    ]) {
      const s = stats(values);
      md(
        `| ${path} | **${fmt(s.median)}** | **${fmt(s.p95)}** | ${fmt(s.min)} | ${fmt(s.max)} | ${s.n} of ${values.length} |`,
      );
    }
    md();
    if (rebuilds !== 0) {
      md(
        rebuilds === null
          ? "The card's output stayed silent through 3 rebuilds of bridged's card side (its playback stuck in clock-skew corrections on a busy machine: web/tests/README.md)."
          : `The card's output carried sound after ${rebuilds} rebuild(s) of bridged's card side (its playback stuck in clock-skew corrections on a busy machine: web/tests/README.md).`,
      );
    }
    md(`While measuring: ${cpuLine(usage)}.`);
    md();
  });
}

/**
 * Browser → room → browser on each media engine, on a fresh stack each: Janus AudioBridge, then
 * partyline's own rooms in bridged (`media.engine: bridged`), ENGINE_ROUNDS times in turn (a
 * run's figures move by tens of ms from stack to stack: the medians of the rounds are what
 * compare). The same talker's bursts and listener as `latency`.
 */
async function engines() {
  const engineList = [
    ['Janus AudioBridge (`media.engine: janus`)', false],
    ["partyline's rooms in bridged (`media.engine: bridged`)", true],
  ];
  md('### Mouth-to-ear by media engine (`engines`)');
  md();
  md(
    "| engine, round | browser → room → browser median ms | p95 ms | min | max | onsets matched | the listener's jitter buffer, mean ms |",
  );
  md('|---|---|---|---|---|---|---|');
  const cpu = new CpuWindow();
  const medians = new Map(engineList.map(([engine]) => [engine, []]));
  for (let round = 1; round <= ENGINE_ROUNDS; round += 1) {
    for (const [engine, rooms] of engineList) {
      const s = await oneEngine(engine, rooms, round);
      medians.get(engine).push(s.median);
    }
  }
  for (const [engine, values] of medians)
    md(`| ${engine}, **median of the rounds** | **${fmt(quantile(values, 0.5))}** | | | | | |`);
  md();
  md(`While measuring: ${cpuLine(cpu.stop())}.`);
  md();
}

/** One round of `engines` on one engine: its table row, and its figures. */
async function oneEngine(engine, rooms, round) {
  const X = 'bench';
  return withTemp(async (dir) => {
    const control = await Control.start(['Bench'], { rooms });
    const browsers = [];
    try {
      const bursts = await writeBursts(join(dir, 'bursts.wav'), 1000, {
        burstMs: 80,
        everyMs: BURST_EVERY_MS,
        seconds: (BURST_EVERY_MS * 10) / 1000,
      });
      browsers.push(await launchBrowser({ audioFile: bursts }), await launchBrowser());
      const a = await panel(browsers[0], control, 'Talker', `/?groups=${X}`, INSTRUMENTED);
      const b = await panel(browsers[1], control, 'Listener', `/?groups=${X}&talk=`, INSTRUMENTED);
      await latchAll(a, [X]);
      await sleep(2000); // the jitter buffers' first seconds
      await startEnvelope(a.page, 'mouth', null);
      await startEnvelope(b.page, 'ear', X);
      const before = await inboundStats(b.page);
      progress(`engines: round ${round}, ${BURSTS} bursts through ${engine}`);
      await sleep((BURSTS + 1) * BURST_EVERY_MS);
      const [mouth, ear] = [await readEnvelope(a.page, 'mouth'), await readEnvelope(b.page, 'ear')];
      const after = await inboundStats(b.page);
      const emitted = after.jitterBufferEmittedCount - before.jitterBufferEmittedCount;
      const buffered = emitted > 0 ? ((after.jitterBufferDelay - before.jitterBufferDelay) / emitted) * 1000 : null;
      const values = delays(onsets(mouth), onsets(ear), endOf(ear));
      const s = stats(values);
      md(
        `| ${engine}, ${round} | ${fmt(s.median)} | ${fmt(s.p95)} | ${fmt(s.min)} | ${fmt(s.max)} | ${s.n} of ${values.length} | ${fmt(buffered)} |`,
      );
      return s;
    } finally {
      await Promise.all(browsers.map((b) => b.close()));
      await control.stop();
    }
  });
}

async function network() {
  md('### Network back (`network`): a 4-line panel');
  md();
  for (const down of DOWN_SECS) await networkSeries(down);
}

/** TRIES outages of `downSecs` each. */
async function networkSeries(downSecs) {
  const lines = ['net-1', 'net-2', 'net-3', 'net-4'];
  md(`#### Link down ${downSecs} s, ${TRIES} times`);
  md();
  await withTemp(async (dir) => {
    const control = await Control.start(['Net 1', 'Net 2', 'Net 3', 'Net 4']);
    const browsers = [];
    const tries = [];
    let cpu;
    try {
      browsers.push(
        await launchBrowser({ audioFile: await writeTone(join(dir, '440.wav'), 440) }),
        await launchBrowser(),
      );
      const talker = await panel(browsers[0], control, 'Talker', `/?groups=${lines}`);
      const listener = await panel(browsers[1], control, 'Listener', `/?groups=${lines}&talk=`);
      await latchAll(talker, lines);
      await hearsAll(listener, lines);
      cpu = new CpuWindow();
      for (let n = 1; n <= TRIES; n += 1) {
        const identity = listener.token.participantIdentity;
        const tDown = performance.now();
        await setLink(false);
        let up = false;
        try {
          await listener.waitState('reconnecting', 20_000);
          await sleep(Math.max(0, downSecs * 1000 - (performance.now() - tDown)));
          // Each line's first rise over SOUND_DB from under it, on the page's clock.
          const watching = listener.page.evaluate(
            ([ids, threshold]) =>
              new Promise((resolve) => {
                const heard = {};
                const quiet = new Set();
                const timer = setInterval(() => {
                  for (const id of ids) {
                    const db = Number(document.querySelector(`[data-line="${id}"]`)?.dataset.levelIn ?? -100);
                    if (db <= threshold) quiet.add(id);
                    else if (quiet.has(id) && heard[id] === undefined)
                      heard[id] = performance.timeOrigin + performance.now();
                  }
                  if (ids.every((id) => heard[id] !== undefined)) {
                    clearInterval(timer);
                    resolve(heard);
                  }
                }, 10);
                setTimeout(() => {
                  clearInterval(timer);
                  resolve(heard);
                }, 60_000);
              }),
            [lines, SOUND_DB],
          );
          await sleep(100); // the watcher sees every line quiet first
          await setLink(true);
          up = true;
          const tUp = epochMs();
          const connected = listener.waitState('connected', 60_000).then(() => epochMs() - tUp);
          const heard = await watching;
          const perLine = lines.map((id) => (heard[id] === undefined ? null : heard[id] - tUp));
          const all = perLine.includes(null) ? null : Math.max(...perLine);
          const connectedMs = await connected;
          const rejoined = listener.token.participantIdentity !== identity;
          tries.push({ all, perLine, connectedMs, rejoined });
          progress(
            `network (${downSecs} s down): try ${n}: audio on every line ${fmt(all)} ms after link up (lines ${perLine.map((v) => fmt(v)).join(', ')}), panel connected after ${fmt(connectedMs)} ms, ${rejoined ? 'rejoined' : 'same session'}`,
          );
        } finally {
          if (!up) await setLink(true);
        }
        await talker.waitState('connected', 60_000);
        await hearsAll(listener, lines, 60_000);
        await sleep(1000);
      }
    } finally {
      await setLink(true).catch(() => {});
      await Promise.all(browsers.map((b) => b.close()));
      await control.stop();
    }
    const usage = cpu.stop();
    const all = stats(tries.map((t) => t.all));
    const first = stats(tries.map((t) => Math.min(...t.perLine.filter((v) => v !== null))));
    const connected = stats(tries.map((t) => t.connectedMs));
    const rejoins = tries.filter((t) => t.rejoined).length;
    md('| from link up to | median ms | p95 ms | min | max | tries |');
    md('|---|---|---|---|---|---|');
    md(
      `| audio on **every** line (the last line heard) | **${fmt(all.median)}** | **${fmt(all.p95)}** | ${fmt(all.min)} | ${fmt(all.max)} | ${all.n} of ${tries.length} |`,
    );
    md(
      `| audio on the first line | ${fmt(first.median)} | ${fmt(first.p95)} | ${fmt(first.min)} | ${fmt(first.max)} | ${first.n} |`,
    );
    md(
      `| the panel \`connected\` | ${fmt(connected.median)} | ${fmt(connected.p95)} | ${fmt(connected.min)} | ${fmt(connected.max)} | ${connected.n} |`,
    );
    md();
    md(
      `${tries.length - rejoins} of ${tries.length} tries came back in the same session (ICE recovered), ${rejoins} rejoined with a new token.`,
    );
    md(`While measuring: ${cpuLine(usage)}.`);
    md();
  });
}

/**
 * Confines `pid` and the processes below it (every thread) to CPU 0 at nice 19: the other CPU
 * stays to Janus, the talker and the listener (and to the rest of the machine).
 */
async function confine(pid) {
  const tids = processTree(pid).flatMap(threadIds);
  if (tids.length === 0) return;
  await run('renice', ['-n', '19', '-p', ...tids]).catch(() => {});
  await Promise.all(tids.map((tid) => run('taskset', ['-p', '-c', '0', tid]).catch(() => {})));
}

/**
 * Janus's view of the participant `display` in `room` (AudioBridge's `queue-in`: its packets
 * waiting to be mixed; RTCP's `jitter-local`: of the packets it receives), sampled every 200 ms
 * until `stop()`: `{ emptyQueue, samples, jitterMs }`: how many samples found its queue empty
 * (Janus mixed without it: its packets came late).
 */
function watchParticipant(janus, room, display) {
  let handle = null;
  const seen = { emptyQueue: 0, samples: 0, jitterMs: 0 };
  const find = async () => {
    for (const session of (await janus.admin({ janus: 'list_sessions' })).sessions ?? []) {
      for (const id of (await janus.admin({ janus: 'list_handles', session_id: session })).handles ?? []) {
        const info = (await janus.admin({ janus: 'handle_info', session_id: session, handle_id: id })).info;
        if (info?.plugin_specific?.display === display && info.plugin_specific.room === room) return { session, id };
      }
    }
    return null;
  };
  let running = true;
  const loop = (async () => {
    while (running) {
      handle ??= await find();
      if (handle) {
        const info = (await janus.admin({ janus: 'handle_info', session_id: handle.session, handle_id: handle.id }))
          .info;
        const queue = info?.plugin_specific?.['queue-in'];
        if (queue === undefined) {
          handle = null;
        } else {
          seen.samples += 1;
          if (queue === 0) seen.emptyQueue += 1;
          seen.jitterMs = Math.max(seen.jitterMs, info.webrtc?.media?.[0]?.rtcp?.main?.['jitter-local'] ?? 0);
        }
      }
      await sleep(200);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return seen;
    },
  };
}

/**
 * One capacity series: users added STEP_USERS at a time until two steps in a row are degraded
 * or MAX_USERS; `confined`: the users' Chromium on CPU 0 at nice 19. A row per step.
 */
async function capacitySeries(confined) {
  const lines = ['load-1', 'load-2', 'load-3', 'load-4'];
  const [L] = lines;
  const rows = [];
  await withTemp(async (dir) => {
    const control = await Control.start(['Load 1', 'Load 2', 'Load 3', 'Load 4']);
    const browsers = [];
    try {
      const launched = [
        await launch({ audioFile: await writeTone(join(dir, '440.wav'), 440) }),
        await launch(),
        await launch(),
      ];
      browsers.push(...launched.map((l) => l.browser));
      const [talkBrowser, listenBrowser, loadBrowser] = browsers;
      const [talkPid, listenPid, loadPid] = launched.map((l) => l.pid);
      const talker = await panel(talkBrowser, control, 'Talker', `/?groups=${L}`, INSTRUMENTED);
      const listener = await panel(listenBrowser, control, 'Listener', `/?groups=${L}&talk=`, INSTRUMENTED);
      await latchAll(talker, [L]);
      await hearsAll(listener, [L]);
      // What the talker's page sends (its microphone) and what the listener's receives: a
      // dropout heard but not sent happened between them.
      await startEnvelope(talker.page, 'mouth', null);
      await startEnvelope(listener.page, 'ear', L);
      const janus = await control.janus.pid();
      const users = [];
      let bad = 0;
      for (let target = 0; target <= MAX_USERS; target += STEP_USERS) {
        const joining = [];
        for (let n = users.length + 1; n <= target; n += 1) {
          joining.push(panel(loadBrowser, control, `User ${n}`, `/?groups=${lines}`).then((p) => users.push(p)));
        }
        const joined = await Promise.allSettled(joining);
        const joinsFailed = joined.filter((j) => j.status === 'rejected').length;
        if (confined) await confine(loadPid); // the new users' renderers and threads too
        await sleep(3000);
        await readEnvelope(talker.page, 'mouth', { clear: true });
        await readEnvelope(listener.page, 'ear', { clear: true });
        const before = await inboundStats(listener.page);
        const talkerInJanus = watchParticipant(control.janus, L, 'Talker');
        const cpu = new CpuWindow(
          {
            janus: () => [janus],
            load: () => processTree(loadPid),
            measuring: () => [...processTree(talkPid), ...processTree(listenPid)],
          },
          janus,
        );
        await sleep(WINDOW_SECS * 1000);
        const usage = cpu.stop();
        const inJanus = await talkerInJanus.stop();
        const heard = dropouts(await readEnvelope(listener.page, 'ear', { clear: true }));
        const sent = dropouts(await readEnvelope(talker.page, 'mouth', { clear: true }));
        const after = await inboundStats(listener.page);
        const received = after.totalSamplesReceived - before.totalSamplesReceived;
        const concealed = received > 0 ? ((after.concealedSamples - before.concealedSamples) / received) * 100 : null;
        const states = await Promise.all(users.map((p) => p.state().catch(() => 'closed')));
        const connected = states.filter((state) => state === 'connected').length;
        // Degraded: the listener hears dropouts the talker's page did not send, conceals 1 % of
        // its audio or more, or hears nothing; or a user could not join or fell out.
        const degraded =
          heard.count > sent.count ||
          !(concealed < 1) ||
          heard.median < SOUND_DB ||
          joinsFailed > 0 ||
          connected < users.length;
        rows.push({
          users: users.length,
          connected,
          joinsFailed,
          usage,
          heard,
          sent,
          inJanus,
          concealed,
          jitterMs: after.jitter * 1000,
          degraded,
        });
        progress(
          `capacity (${confined ? 'confined' : 'shared'}): ${users.length} users (${connected} connected): Janus ${usage.groups.janus} % (busiest thread ${usage.busiestThread?.name} ${usage.busiestThread?.percent} %), users' Chromium ${usage.groups.load} %, machine ${usage.machine} % (others ${usage.others} %); listener median ${heard.median} dBFS, ${heard.count} dropouts (longest ${heard.longest} ms; the talker's microphone ${sent.count}; the talker's queue in Janus empty in ${inJanus.emptyQueue} of ${inJanus.samples} samples), concealed ${fmt(concealed, 2)} %${degraded ? ': DEGRADED' : ''}`,
        );
        bad = degraded ? bad + 1 : 0;
        if (bad >= 2) break;
      }
    } finally {
      await Promise.all(browsers.map((b) => b.close()));
      await control.stop();
    }
  });
  return rows;
}

async function capacity() {
  md('### Capacity (`capacity`): panel users with 4 lines each');
  for (const series of CAPACITY_SERIES) {
    const confined = series === 'confined';
    const rows = await capacitySeries(confined);
    md();
    md(
      confined
        ? "#### The users' Chromium confined to CPU 0 at nice 19 (Janus, the talker and the listener keep the other CPU)"
        : "#### Everything shares both CPUs (the users' Chromium competes with Janus, as on one machine)",
    );
    md();
    md(
      "| users (lines) | connected | Janus CPU % (busiest thread) | Chromium CPU %: users / talker + listener | machine busy % (others) | listener level dBFS | dropouts ≥ 10 ms heard (longest) / sent | talker's queue in Janus empty | concealed % | jitter ms: Janus → listener / talker → Janus | |",
    );
    md('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      const u = r.usage;
      md(
        `| ${r.users} (${r.users * 4}) | ${r.connected}${r.joinsFailed ? ` (${r.joinsFailed} joins failed)` : ''} | ${fmt(u.groups.janus)} (${u.busiestThread?.name ?? '–'} ${fmt(u.busiestThread?.percent)}) | ${fmt(u.groups.load)} / ${fmt(u.groups.measuring)} | ${fmt(u.machine)} (${fmt(u.others)}) | ${fmt(r.heard.median, 1)} | ${r.heard.count} (${r.heard.longest} ms) / ${r.sent.count} | ${r.inJanus.emptyQueue} of ${r.inJanus.samples} | ${fmt(r.concealed, 2)} | ${fmt(r.jitterMs)} / ${fmt(r.inJanus.jitterMs)} | ${r.degraded ? 'degraded' : 'clean'} |`,
      );
    }
    md();
    const firstBad = rows.findIndex((r) => r.degraded);
    const lastClean = (firstBad < 0 ? rows : rows.slice(0, firstBad)).at(-1);
    md(
      firstBad < 0
        ? `No step degraded up to ${rows.at(-1)?.users} users.`
        : `Last clean step: **${lastClean ? `${lastClean.users} users (${lastClean.users * 4} lines)` : 'none'}**; first degraded: ${rows[firstBad].users} users, with Janus at ${fmt(rows[firstBad].usage.groups.janus)} %, the users' Chromium at ${fmt(rows[firstBad].usage.groups.load)} % and the machine at ${fmt(rows[firstBad].usage.machine)} % of ${rows[firstBad].usage.cpus * 100} %.`,
    );
    // The cost of a user from the clean steps (a degraded step's users may have fallen out).
    const measured = (firstBad < 0 ? rows : rows.slice(0, firstBad)).filter((r) => r.users > 0);
    if (measured.length >= 2) {
      const [a, b] = [measured[0], measured.at(-1)];
      const perUser = (key) => (b.usage.groups[key] - a.usage.groups[key]) / (b.users - a.users);
      md(
        `Per user (4 lines), from ${a.users} to ${b.users} users: Janus ${fmt(perUser('janus'), 1)} % of one CPU, the users' Chromium ${fmt(perUser('load'), 1)} %.`,
      );
    }
    md();
  }
}

/**
 * What a simulated line of the headless crew costs against a line of a Chromium panel, in one
 * run on one stack: COST_USERS panel users in Chromium with four lines each (one of them talking
 * on all four, the rest listening), then as many `partyline-crew` members on the same lines
 * (talking in turns: one talker per line), each measured over WINDOW_SECS once joined.
 */
async function cost() {
  const lines = ['load-1', 'load-2', 'load-3', 'load-4'];
  const rows = [];
  await withTemp(async (dir) => {
    const control = await Control.start(['Load 1', 'Load 2', 'Load 3', 'Load 4']);
    try {
      const { browser, pid } = await launch({ audioFile: await writeTone(join(dir, '440.wav'), 440) });
      try {
        const users = [];
        for (let n = 1; n <= COST_USERS; n += 1)
          users.push(await panel(browser, control, `User ${n}`, `/?groups=${lines}`));
        await latchAll(users[0], lines);
        await sleep(3000);
        const cpu = new CpuWindow({ chromium: () => processTree(pid) });
        await sleep(WINDOW_SECS * 1000);
        const usage = cpu.stop();
        rows.push({ what: 'Chromium panels', lines: COST_USERS * 4, percent: usage.groups.chromium });
      } finally {
        await browser.close();
      }
      const args = [
        '--server',
        control.origin,
        '--listen',
        lines.join(','),
        '--talk',
        lines.join(','),
        '--users',
        String(COST_USERS),
        '--ramp',
        '2',
        '--duration',
        String(WINDOW_SECS),
        '--turn',
        '3',
        '--media-address',
        iceAddress(),
        '--json',
      ];
      const { stdout } = await run(CREW_BIN, args, { maxBuffer: 1 << 24 });
      const report = JSON.parse(stdout);
      if (report.joins_failed > 0 || report.users !== COST_USERS)
        throw new Error(`partyline-crew: ${report.users} joined, ${report.joins_failed} failed`);
      rows.push({
        what: 'partyline-crew members',
        lines: report.lines,
        percent: report.crew_cpu_percent,
        gaps: report.gaps,
      });
    } finally {
      await control.stop();
    }
  });
  md(`### The headless crew against Chromium (\`cost\`): ${COST_USERS} users with 4 lines each, ${WINDOW_SECS} s each`);
  md();
  md('| client | lines | CPU % of one core | per line |');
  md('|---|---|---|---|');
  for (const r of rows) md(`| ${r.what} | ${r.lines} | ${fmt(r.percent, 1)} | ${fmt(r.percent / r.lines, 2)} |`);
  md();
  const [chromium, crew] = rows.map((r) => r.percent / r.lines);
  md(
    `A simulated line costs **${fmt((crew / chromium) * 100, 1)} %** of a Chromium panel's line (goal: at most 10 %); the crew's listeners heard ${rows[1].gaps} gaps.`,
  );
  md();
}

/**
 * A control surface's key press (`POST /api/panel/{key}/lines/{group}/talk`, sent from node):
 * the talker's panel applies it (its line's `data-talk` changes: a MutationObserver in the page
 * stamps it) and the listener hears the talker's steady tone (an onset in its envelope).
 */
async function remote() {
  const X = 'remote';
  md("### Remote control (`remote`): a surface's key press");
  md();
  await withTemp(async (dir) => {
    const control = await Control.start(['Remote']);
    const browsers = [];
    try {
      browsers.push(
        await launchBrowser({ audioFile: await writeTone(join(dir, '1k.wav'), 1000) }),
        await launchBrowser(),
      );
      const talker = await panel(browsers[0], control, 'Talker', `/?groups=${X}`);
      const listener = await panel(browsers[1], control, 'Listener', `/?groups=${X}&talk=`, INSTRUMENTED);
      await waitFor('the listener receiving the line', async () => (await listener.lineLevel(X)) !== null, {
        timeout: 15_000,
      });
      const key = talker.token.panelKey;
      await waitFor(
        "the talker's panel online for its surface",
        async () => {
          const response = await fetch(`${control.origin}/api/panel/${key}`);
          return response.ok && (await response.json()).online;
        },
        { timeout: 15_000 },
      );
      await talker.page.evaluate((id) => {
        const line = document.querySelector(`[data-line="${id}"]`);
        window.benchTalk = [];
        new MutationObserver(() =>
          window.benchTalk.push({ at: performance.timeOrigin + performance.now(), talk: line.dataset.talk }),
        ).observe(line, { attributes: true, attributeFilter: ['data-talk'] });
      }, X);
      const press = async (state) => {
        const t0 = epochMs();
        const response = await fetch(`${control.origin}/api/panel/${key}/lines/${X}/talk`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ state }),
        });
        const answeredMs = epochMs() - t0;
        if (!response.ok) throw new Error(`POST …/talk ${state}: ${response.status} ${await response.text()}`);
        return { t0, answeredMs };
      };
      /** Each command's delay to the first change of data-talk after it. */
      const applied = async (sent) => {
        const changes = await talker.page.evaluate(() => window.benchTalk.splice(0));
        return sent.map(({ t0 }) => {
          const change = changes.find((c) => c.at > t0);
          return change ? change.at - t0 : null;
        });
      };

      // Key press to audio: held for 500 ms, then released, every BURST_EVERY_MS.
      const cpu = new CpuWindow();
      await startEnvelope(listener.page, 'ear', X);
      await sleep(1000);
      const ons = [];
      progress(`remote: ${BURSTS} key presses to audio`);
      for (let n = 0; n < BURSTS; n += 1) {
        const on = await press('on');
        ons.push(on);
        await sleep(Math.max(0, 500 - (epochMs() - on.t0)));
        await press('off');
        await sleep(Math.max(0, BURST_EVERY_MS - (epochMs() - on.t0)));
      }
      await sleep(HEARD_WITHIN_MS);
      const ear = await readEnvelope(listener.page, 'ear');
      const toAudio = delays(
        ons.map((p) => p.t0),
        onsets(ear),
        endOf(ear),
      );
      const pressApplied = await applied(ons);

      // Commands back to back (on, off, …, 50 ms apart): request to applied, and to the answer.
      progress(`remote: ${COMMANDS} commands`);
      const sent = [];
      for (let n = 0; n < COMMANDS; n += 1) {
        sent.push(await press(n % 2 === 0 ? 'on' : 'off'));
        await sleep(50);
      }
      if (COMMANDS % 2 === 1) await press('off');
      const commandApplied = await applied(sent);
      const usage = cpu.stop();

      md("| from the surface's request to | median ms | p95 ms | p99 ms | min | max | matched |");
      md('|---|---|---|---|---|---|---|');
      for (const [what, values] of [
        ['audio heard in another browser (talk `on`)', toAudio],
        ['the panel applied it (`data-talk`), key presses above', pressApplied],
        ['the panel applied it (`data-talk`), commands 50 ms apart', commandApplied],
        ['the answer (the panel reported it applied), commands 50 ms apart', sent.map((c) => c.answeredMs)],
      ]) {
        const st = stats(values);
        md(
          `| ${what} | **${fmt(st.median, 1)}** | **${fmt(st.p95, 1)}** | **${fmt(st.p99, 1)}** | ${fmt(st.min, 1)} | ${fmt(st.max, 1)} | ${st.n} of ${values.length} |`,
        );
      }
      md();
      md(`While measuring: ${cpuLine(usage)}.`);
      md();
    } finally {
      await Promise.all(browsers.map((b) => b.close()));
      await control.stop();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Keys

/**
 * Each onset's delay to the first `dimmed` time (epoch ms) after it, within HEARD_WITHIN_MS.
 */
const reactions = (starts, dims) =>
  starts.map((s) => {
    const d = dims.find((t) => t >= s && t < s + HEARD_WITHIN_MS);
    return d === undefined ? null : d - s;
  });

/** Records in `page` every time `[data-line=LINE]` turns `data-dimmed="true"` (epoch ms). */
async function watchDimmed(page, line) {
  await page.evaluate((groupId) => {
    const element = document.querySelector(`[data-line="${groupId}"]`);
    window.benchDims = [];
    new MutationObserver(() => {
      if (element.dataset.dimmed === 'true') window.benchDims.push(performance.timeOrigin + performance.now());
    }).observe(element, { attributes: true, attributeFilter: ['data-dimmed'] });
  }, line);
}

/** The goal of `keys` (BENCHMARKS.md, "Keys"): a program line dims within 100 ms of a talker
 * first heard (the issue's figure). An IFB output is a block of the same matrix as any other
 * output: within IFB_OVER_OUTPUT_MS of a plain output of the same talker. */
const DIM_GOAL_MS = 100;
const IFB_OVER_OUTPUT_MS = 1;
/**
 * The desk's ticks for the dim: 3 s apart, since a line's meter falls 30 dB/s and the dim
 * holds 600 ms after it: a talker heard every second would keep the program dimmed throughout.
 */
const DIM_EVERY_MS = 3007;
const SLOW_TICKS = `audiotestsrc wave=ticks freq=1000 sine-periods-per-tick=20 tick-interval=${DIM_EVERY_MS * 1e6} is-live=true`;
const DIM_TICKS = number('DIM_TICKS', 15, 4);

/**
 * The keys professionals press: a producer's talk to a presenter's IFB on the card (a
 * browser's bursts, then ticks on a card input of the interrupt group, each to the IFB output
 * and to a plain output hearing the same group, in one recording; the IFB's program silent
 * meanwhile, so that onsets show), and a program line's dim on a listener's panel (each of the
 * desk's ticks first heard on its Talk line → its Show line `data-dimmed`).
 */
async function keys() {
  const [SHOW, TALK] = ['show', 'talk'];
  const [IFB_OUTPUT, MONITOR_OUTPUT] = [3, 5];
  md('### Keys (`keys`)');
  md();
  await withBurstStack(['Show', 'Talk'], async ({ control, talkBrowser, listenBrowser, cardOut, cardIn }) => {
    const program = await control.admin('PUT', `/groups/${SHOW}`, { program: true });
    if (program.status !== 200) throw new Error(`PUT /groups/${SHOW}: ${program.status}`);
    // The show's sound on input 1 (program line Show). Talk: the desk talks from input 0,
    // Monitor (input 6, silent) hears Talk on output 5. The presenter's IFB on output 3: its
    // program input 2 (silent), interrupted by Talk.
    const feed = await control.card.tone(1, 440);
    await control.addServerUser({ name: 'Show feed', group: SHOW, inputChannel: 1 });
    await control.addServerUser({ name: 'Desk', group: TALK, inputChannel: 0 });
    await control.addServerUser({ name: 'Monitor', group: TALK, inputChannel: 6, outputChannel: MONITOR_OUTPUT });
    await control.addServerUser({
      name: 'Presenter',
      group: SHOW,
      inputChannel: 4,
      outputChannel: IFB_OUTPUT,
      ifb: { program: 2, interrupt: TALK, dimDb: -20 },
    });
    const a = await panel(talkBrowser, control, 'Producer', `/?groups=${TALK}&talk=${TALK}`, INSTRUMENTED);
    const b = await panel(listenBrowser, control, 'Listener', `/?groups=${SHOW},${TALK}&talk=`, INSTRUMENTED);
    await hearsAll(b, [SHOW]);
    await sleep(2000); // the card side's first seconds
    const cpu = new CpuWindow();

    // The producer's bursts.
    await startEnvelope(a.page, 'mouth', null);
    await latchAll(a, [TALK]);
    const from = cardOut.seconds;
    progress(`keys: ${BURSTS} bursts from the producer`);
    await sleep((BURSTS + 1) * BURST_EVERY_MS);
    const mouth = onsets(await readEnvelope(a.page, 'mouth'));
    const [ifb, monitor] = [cardOut.envelope(IFB_OUTPUT, from), cardOut.envelope(MONITOR_OUTPUT, from)];
    await a.control(TALK, 'talk').click();
    await a.waitLine(TALK, 'talk', 'off');
    const browserToIfb = delays(mouth, onsets(ifb), endOf(ifb));
    const browserToMonitor = delays(mouth, onsets(monitor), endOf(monitor));

    // The desk's ticks, slow enough for the dim to let go between them.
    await sleep(1000);
    await watchDimmed(b.page, SHOW);
    await startEnvelope(b.page, 'talk', TALK);
    const ticks = await control.card.play(SLOW_TICKS, [0]);
    const [inFrom, outFrom] = [cardIn.seconds, cardOut.seconds];
    progress(`keys: ${DIM_TICKS} ticks on the desk's input, ${DIM_EVERY_MS} ms apart`);
    await sleep((DIM_TICKS + 1) * DIM_EVERY_MS);
    const input = onsets(cardIn.envelope(0, inFrom));
    const [ifbTicks, monitorTicks] = [cardOut.envelope(IFB_OUTPUT, outFrom), cardOut.envelope(MONITOR_OUTPUT, outFrom)];
    const heard = await readEnvelope(b.page, 'talk');
    const dims = await b.page.evaluate(() => window.benchDims);
    await ticks.stop();
    await feed.stop();
    const cardToIfb = delays(input, onsets(ifbTicks), endOf(ifbTicks));
    const cardToMonitor = delays(input, onsets(monitorTicks), endOf(monitorTicks));
    const dimReaction = reactions(
      onsets(heard).filter((t) => t + HEARD_WITHIN_MS < endOf(heard)),
      dims,
    );
    const usage = cpu.stop();

    const median = (values) => stats(values).median;
    const overOutput = (ifbValues, plain) => {
      const met = stats(ifbValues).n > 0 && median(ifbValues) <= median(plain) + IFB_OVER_OUTPUT_MS;
      return { goal: `median ≤ the plain output's + ${IFB_OVER_OUTPUT_MS}`, met };
    };
    const dim = stats(dimReaction);
    md('| path | median ms | p95 ms | min | max | matched | goal |');
    md('|---|---|---|---|---|---|---|');
    let missed = 0;
    for (const [path, values, verdict] of [
      [
        "program dim: the desk first heard on the listener's Talk line → its Show line dimmed (`data-dimmed`)",
        dimReaction,
        { goal: `p95 ≤ ${DIM_GOAL_MS}`, met: dim.n > 0 && dim.p95 <= DIM_GOAL_MS },
      ],
      [
        'producer talk: browser → room → IFB output on the card (bridged)',
        browserToIfb,
        overOutput(browserToIfb, browserToMonitor),
      ],
      ['the same bursts → a plain output hearing Talk', browserToMonitor, null],
      ['producer talk: a card input of Talk → IFB output', cardToIfb, overOutput(cardToIfb, cardToMonitor)],
      ['the same ticks → a plain output hearing Talk', cardToMonitor, null],
    ]) {
      const s = stats(values);
      missed += verdict && !verdict.met ? 1 : 0;
      const goal = verdict ? `${verdict.goal}: ${verdict.met ? 'met' : '**missed**'}` : '—';
      md(
        `| ${path} | **${fmt(s.median)}** | **${fmt(s.p95)}** | ${fmt(s.min)} | ${fmt(s.max)} | ${s.n} of ${values.length} | ${goal} |`,
      );
    }
    md();
    md(
      'The card is the harness\'s PulseAudio card (10 ms capture, 20 ms playback buffers, each side read by a recorder of its own): its own paths are in "The matrix" on the PipeWire test card.',
    );
    md();
    if (missed) process.exitCode = 1;
    md(`While measuring: ${cpuLine(usage)}.`);
    md();
  });
  await personKeys();
}

/** Presses of each key in `personKeys` (one of them the person key's first, which opens its line). */
const PRESSES = number('PRESSES', 20, 4);

/**
 * Press → heard: a key pressed in `a`'s page (`key`: a locator) until `b` hears it on its line
 * `line` (a selector: `data-level-in` over SOUND_DB, polled every 5 ms in b's page, which
 * reads a 2048-sample meter), released after, and b's line quiet again before the next.
 */
async function pressToHeard(a, b, key, line) {
  await key.hover();
  const t0 = performance.now();
  await a.page.mouse.down();
  await b.page.waitForFunction(
    ([selector, db]) => Number(document.querySelector(selector)?.dataset.levelIn ?? -100) > db,
    [line, SOUND_DB],
    { timeout: 15_000, polling: 5 },
  );
  const ms = performance.now() - t0;
  await sleep(350); // a hold, not a tap (which latches)
  await a.page.mouse.up();
  await b.page.waitForFunction(
    ([selector]) => Number(document.querySelector(selector)?.dataset.levelIn ?? -100) < -60,
    [line],
    { timeout: 15_000, polling: 20 },
  );
  return ms;
}

/**
 * A person key against a line's talk key, in the same two panels (Producer, whose person key
 * reaches Presenter, and Presenter, both on the group Talk; Producer's microphone a steady
 * tone): the first press (the direct line opened and joined by both), then PRESSES presses
 * each of the person key and of Talk's key, in turn.
 */
async function personKeys() {
  const TALK = 'talk';
  await withTemp(async (dir) => {
    const control = await Control.start(['Talk'], {});
    const browsers = [];
    try {
      for (const position of [
        { name: 'Presenter', listen: [TALK], talk: [TALK] },
        { name: 'Producer', listen: [TALK], talk: [TALK], talkTo: ['presenter'] },
      ]) {
        const { status, body } = await control.admin('POST', '/positions', position);
        if (status !== 201) throw new Error(`POST /positions: ${status} ${JSON.stringify(body)}`);
      }
      browsers.push(
        await launchBrowser({ audioFile: await writeTone(join(dir, 'tone.wav'), 440) }),
        await launchBrowser(),
      );
      const a = await panel(browsers[0], control, 'Producer', '/?position=producer');
      const b = await panel(browsers[1], control, 'Presenter', '/?position=presenter');
      const personKey = a.page.locator('button.person[data-person="presenter"]');
      await waitFor('the person key online', async () => (await personKey.getAttribute('data-online')) === 'true', {
        timeout: 15_000,
      });
      const [direct, line] = ['[data-direct="Producer"]', `[data-line="${TALK}"]`];
      progress(`keys: the person key's first press, then ${PRESSES} presses of it and of a line's key`);
      const first = await pressToHeard(a, b, personKey, direct);
      const [person, group] = [[], []];
      for (let i = 0; i < PRESSES; i += 1) {
        person.push(await pressToHeard(a, b, personKey, direct));
        group.push(await pressToHeard(a, b, a.control(TALK, 'talk'), line));
      }
      md('| key | median ms | p95 ms | min | max | presses |');
      md('|---|---|---|---|---|---|');
      md(
        `| person key, first press: the direct line opened and joined by both panels → heard | **${fmt(first)}** | – | – | – | 1 |`,
      );
      for (const [what, values] of [
        ['person key, the direct line open → heard', person],
        ["a line's talk key → heard", group],
      ]) {
        const s = stats(values);
        md(`| ${what} | **${fmt(s.median)}** | **${fmt(s.p95)}** | ${fmt(s.min)} | ${fmt(s.max)} | ${s.n} |`);
      }
      md();
      md(
        "Press → heard in the other panel's page: the key pressed, the line's `data-level-in` over -50 dBFS (a meter over 2048 samples, polled every 5 ms): both keys measured alike, in turn.",
      );
      md();
    } finally {
      await Promise.all(browsers.map((browser) => browser.close()));
      await control.stop();
    }
  });
}

/**
 * WHIP and WHEP against a panel, in one run on one group: the bursts (BURSTS) of a WHIP client
 * (Eyevinn's, in a page of its own) → a listener's panel; then a talker's panel → the same
 * listener's panel and → a WHEP player (Eyevinn's WebRTC player) at once. Onsets as in
 * `latency`: the publisher's and the talker's microphones, the panel's line and the player's
 * media element, each measured in its page.
 */
async function streams() {
  const SHOW = 'show';
  md('### WHIP and WHEP (`streams`)');
  md();
  await withTemp(async (dir) => {
    const control = await Control.start(['Show'], {});
    const browsers = [];
    try {
      const bursts = await writeBursts(join(dir, 'bursts.wav'), 1000, {
        burstMs: 80,
        everyMs: BURST_EVERY_MS,
        seconds: (BURST_EVERY_MS * 10) / 1000,
      });
      browsers.push(
        await launchBrowser({ audioFile: bursts }),
        await launchBrowser({ audioFile: bursts }),
        await launchBrowser(),
      );
      const token = async (kind) => {
        const { status, body } = await control.admin('POST', `/groups/${SHOW}/stream-tokens`, {
          kind,
          name: `Bench ${kind}`,
        });
        if (status !== 201) throw new Error(`POST stream-tokens: ${status} ${JSON.stringify(body)}`);
        return body;
      };
      const [whip, whep] = [await token('whip'), await token('whep')];
      const listener = await panel(browsers[2], control, 'Listener', `/?groups=${SHOW}&talk=`, INSTRUMENTED);
      const publisher = await Person.open(browsers[0], control.origin, 'Publisher', INSTRUMENTED);
      await publisher.page.addScriptTag({ content: await bundleForPage('@eyevinn/whip-web-client', 'WHIP') });
      await publisher.page.evaluate(
        async ([url, secret]) => {
          const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
          window.whip = new window.WHIP.WHIPClient({
            endpoint: url,
            opts: { noTrickleIce: true, authkey: secret, iceServers: [] },
          });
          await window.whip.ingest(stream);
        },
        [whip.url, whip.secret],
      );
      await waitFor('the listener hearing the WHIP source', async () => (await listener.lineLevel(SHOW)) > SOUND_DB, {
        timeout: 15_000,
      });
      await sleep(1000);
      const cpu = new CpuWindow();

      await startEnvelope(publisher.page, 'mouth', null);
      await startEnvelope(listener.page, 'ear', SHOW);
      progress(`streams: ${BURSTS} bursts from the WHIP client`);
      await sleep((BURSTS + 1) * BURST_EVERY_MS);
      const [whipMouth, whipEar] = [
        await readEnvelope(publisher.page, 'mouth'),
        await readEnvelope(listener.page, 'ear', { clear: true }),
      ];
      await publisher.page.evaluate(() => window.whip.destroy());
      const whipToPanel = delays(onsets(whipMouth), onsets(whipEar), endOf(whipEar));

      const talker = await panel(browsers[1], control, 'Talker', `/?groups=${SHOW}`, INSTRUMENTED);
      const player = await Person.open(browsers[0], control.origin, 'Player', INSTRUMENTED);
      await player.page.addScriptTag({ content: await bundleForPage('@eyevinn/webrtc-player', 'WHEP') });
      await player.page.evaluate(
        async ([url, secret]) => {
          const video = document.createElement('video');
          Object.assign(video, { id: 'whep', muted: true, autoplay: true });
          document.body.append(video);
          window.player = new window.WHEP.WebRTCPlayer({ video, type: 'whep', iceServers: [] });
          await window.player.load(new URL(url), `Bearer ${secret}`);
        },
        [whep.url, whep.secret],
      );
      await waitFor(
        "the player's stream",
        async () => player.page.evaluate(() => Boolean(document.querySelector('#whep')?.srcObject)),
        { timeout: 15_000 },
      );
      await sleep(1000);
      await startEnvelope(talker.page, 'mouth', null);
      await startEnvelope(player.page, 'ear', { selector: '#whep' });
      await latchAll(talker, [SHOW]);
      progress(`streams: ${BURSTS} bursts from the talker's panel`);
      await sleep((BURSTS + 1) * BURST_EVERY_MS);
      const [mouth, panelEar, playerEar] = [
        await readEnvelope(talker.page, 'mouth'),
        await readEnvelope(listener.page, 'ear'),
        await readEnvelope(player.page, 'ear'),
      ];
      const panelToPanel = delays(onsets(mouth), onsets(panelEar), endOf(panelEar));
      const panelToWhep = delays(onsets(mouth), onsets(playerEar), endOf(playerEar));
      const usage = cpu.stop();

      md('| path | median ms | p95 ms | min | max | onsets matched |');
      md('|---|---|---|---|---|---|');
      for (const [path, values] of [
        ['WHIP client → room → panel', whipToPanel],
        ['panel → room → panel (the same run)', panelToPanel],
        ['panel → room → WHEP player', panelToWhep],
      ]) {
        const st = stats(values);
        md(
          `| ${path} | **${fmt(st.median)}** | **${fmt(st.p95)}** | ${fmt(st.min)} | ${fmt(st.max)} | ${st.n} of ${values.length} |`,
        );
      }
      md();
      md(
        "The WHIP client (Eyevinn's whip-web-client) and the WHEP player (Eyevinn's webrtc-player) are Chromium pages of their own; each mouth is its page's microphone, each ear the stream its page plays, measured in the page.",
      );
      md();
      md(`While measuring: ${cpuLine(usage)}.`);
      md();
    } finally {
      await Promise.all(browsers.map((browser) => browser.close()));
      await control.stop();
    }
  });
}

/**
 * Crew off-site: a talker's panel behind a home router's NAT (offsite.mjs's namespaces), heard
 * by a listener's panel at the venue, through the TURN relay over TLS on 443 (no UDP let out of
 * the crew's network) and straight (UDP let out), in one run: each path's mouth-to-ear, and the
 * candidate type the talker's panel reported (a relayed path must say `relay`).
 */
async function offsite() {
  const X = 'bench';
  md('### Crew off-site: through the relay against straight (`offsite`)');
  md();
  await withTemp(async (dir) => {
    const net = await OffSiteNet.create(dir);
    const browsers = [];
    let control;
    let relay;
    try {
      control = await Control.start(['Bench'], {
        tls: true,
        listen: '0.0.0.0:0',
        iceIface: net.iface,
        config: relayConfig(),
      });
      relay = await startRelay(dir, control, VENUE);
      const port = new URL(control.origin).port;
      const [crewOrigin, venueOrigin] = [`https://${VENUE}:${port}`, `https://${iceAddress()}:${port}`];
      const bursts = await writeBursts(join(dir, 'bursts.wav'), 1000, {
        burstMs: 80,
        everyMs: BURST_EVERY_MS,
        seconds: (BURST_EVERY_MS * 10) / 1000,
      });
      browsers.push(
        await launchBrowser({ audioFile: bursts, executablePath: await net.chromium(dir, relay.spki) }),
        await launchBrowser(),
      );
      const rows = [];
      for (const [path, udp] of [
        ['through the relay (TURN over TLS, 443)', false],
        ['straight (UDP through the NAT)', true],
      ]) {
        await net.letUdpOut(udp);
        const open = async (browser, origin, name, query) => {
          const p = await Person.open(browser, origin, name, { path: `/?groups=${X}${query}`, ...INSTRUMENTED });
          await p.joinPreset();
          await p.waitState('connected', 60_000);
          return p;
        };
        const name = `Talker ${rows.length + 1}`;
        const a = await open(browsers[0], crewOrigin, name, '');
        const b = await open(browsers[1], venueOrigin, `Listener ${rows.length + 1}`, '&talk=');
        try {
          await latchAll(a, [X]);
          await startEnvelope(a.page, 'mouth', null);
          await startEnvelope(b.page, 'ear', X);
          progress(`offsite: ${BURSTS} bursts, ${path}`);
          await sleep((BURSTS + 1) * BURST_EVERY_MS);
          const [mouth, ear] = [await readEnvelope(a.page, 'mouth'), await readEnvelope(b.page, 'ear')];
          const user = await control.user(name);
          const candidate = user?.lines?.find((l) => l.groupId === X)?.link?.candidateType ?? '–';
          rows.push([path, candidate, delays(onsets(mouth), onsets(ear), endOf(ear))]);
        } finally {
          await a.close();
          await b.close();
        }
      }
      md("| path | the talker's candidate | median ms | p95 ms | min | max | onsets matched |");
      md('|---|---|---|---|---|---|---|');
      for (const [path, candidate, values] of rows) {
        const s = stats(values);
        md(
          `| ${path} | ${candidate} | **${fmt(s.median)}** | **${fmt(s.p95)}** | ${fmt(s.min)} | ${fmt(s.max)} | ${s.n} of ${values.length} |`,
        );
      }
      md();
      md(
        "Both on one machine: the relay's hop is all that differs (this kernel has no netem to stand in for the internet's delay).",
      );
      md();
    } finally {
      await Promise.all(browsers.map((b) => b.close()));
      await control?.stop();
      await relay?.stop(5000);
      await net.remove();
    }
  });
}

// ---------------------------------------------------------------------------------------------

const PARTS = { latency, engines, network, capacity, remote, cost, keys, streams, offsite };
const chosen = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
for (const name of chosen)
  if (!PARTS[name])
    throw new Error(`unknown part ${name} (latency, engines, network, capacity, remote, cost, keys, streams, offsite)`);
// offsite and engines only when named: their own blocks in BENCHMARKS.md (bench/run offsite,
// bench/run engines).
const parts = chosen.length ? chosen : Object.keys(PARTS).filter((part) => !['offsite', 'engines'].includes(part));

md(`Machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim()}); load average before: ${loadAverage()}.`);
md();
let status = 0;
for (const name of parts) {
  progress(`== ${name} (load average ${loadAverage()})`);
  try {
    await PARTS[name]();
  } catch (error) {
    status = 1;
    progress(`${name} failed: ${error.stack}`);
    md(`(\`${name}\` failed: ${error.message.split('\n')[0]})`);
    md();
  }
}
md(`Load average after: ${loadAverage()}.`);
process.stdout.write(`${out.join('\n')}\n`);
process.exit(status || process.exitCode || 0);

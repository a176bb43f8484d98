// The benchmarks' one reader of /proc: load, command lines, threads and CPU accounting: a process tree's CPU time, a
// process's busiest thread, the whole machine's, and the share of the processes in this network
// namespace (the benchmark's own) against everything else on the machine (other work on a shared
// machine).

import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

export const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
const OWN_NETNS = readlinkSync('/proc/self/ns/net');

const read = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null; // the process or thread has gone
  }
};

/** `{ ppid, ticks }` of /proc/PID/stat (or …/task/TID/stat), or null once it has gone. */
function stat(path) {
  const text = read(path);
  if (text === null) return null;
  // The command name (field 2) may hold spaces and parentheses: the fields start after its last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
}

const pids = () =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);

/** `pid` and every process below it. */
export function processTree(pid) {
  const children = new Map();
  for (const p of pids()) {
    const s = stat(`/proc/${p}/stat`);
    if (s) children.set(s.ppid, [...(children.get(s.ppid) ?? []), p]);
  }
  const tree = [];
  const visit = (p) => {
    tree.push(p);
    for (const child of children.get(p) ?? []) visit(child);
  };
  visit(pid);
  return tree;
}

/** The direct children of `pid`. */
export function children(pid) {
  return pids().filter((p) => stat(`/proc/${p}/stat`)?.ppid === pid);
}

/** The CPU ticks (user and system) of thread `tid` of process `pid`, or null once it has gone. */
export const threadTicks = (pid, tid) => stat(`/proc/${pid}/task/${tid}/stat`)?.ticks ?? null;

/** The thread ids of `pid` (none once it has gone). */
export function threadIds(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
}

/** The command line of `pid`, its arguments joined by NULs ('' once it has gone). */
export const commandLine = (pid) => read(`/proc/${pid}/cmdline`) ?? '';

/** The load average over 1, 5 and 15 minutes, as /proc/loadavg writes it. */
export const loadAverage = () => read('/proc/loadavg').split(' ').slice(0, 3).join(' ');

/** The processes in this network namespace (the benchmark's: scripts/netns-run made it). */
function ownProcesses() {
  return pids().filter((p) => {
    try {
      return readlinkSync(`/proc/${p}/ns/net`) === OWN_NETNS;
    } catch {
      return false;
    }
  });
}

/** CPU ticks of the machine: `{ busy, total }` summed over every CPU (/proc/stat). */
function machineTicks() {
  const [, ...values] = read('/proc/stat').split('\n')[0].trim().split(/\s+/).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = values;
  return {
    busy: user + nice + system + irq + softirq + steal,
    total: user + nice + system + idle + iowait + irq + softirq + steal,
  };
}

const ticksOf = (list) =>
  new Map(list.map((p) => [p, stat(`/proc/${p}/stat`)?.ticks]).filter(([, t]) => t !== undefined));

/** The ticks gained between two samples by the processes present in both. */
function gained(before, after) {
  let sum = 0;
  for (const [p, t] of after) if (before.has(p)) sum += t - before.get(p);
  return sum;
}

/**
 * CPU use over a window, in percent of one CPU (200 % = both CPUs of a 2-CPU machine):
 * `groups` maps a name to a function giving that group's process ids (read at the start; a
 * process started during the window does not count); `threadsOf` is one process whose busiest
 * thread is reported too. `stop()` gives `{ machine, own, others, groups: { name: % },
 * busiestThread: { name, percent } }`.
 */
export class CpuWindow {
  constructor(groups = {}, threadsOf = null) {
    this.groups = Object.entries(groups).map(([name, list]) => [name, ticksOf(list())]);
    this.own = ticksOf(ownProcesses());
    this.threadsOf = threadsOf;
    this.threads = threadsOf ? this.threadTicks() : null;
    this.machine = machineTicks();
    this.t0 = performance.now();
  }

  threadTicks() {
    const ticks = threadIds(this.threadsOf).map((tid) => [tid, threadTicks(this.threadsOf, tid)]);
    return new Map(ticks.filter(([, t]) => t !== null));
  }

  stop() {
    const seconds = (performance.now() - this.t0) / 1000;
    const percent = (ticks) => Math.round((ticks / TICKS_PER_SECOND / seconds) * 1000) / 10;
    const machine = machineTicks();
    const cpus = (machine.total - this.machine.total) / TICKS_PER_SECOND / seconds;
    const machineBusy = Math.round(((machine.busy - this.machine.busy) / TICKS_PER_SECOND / seconds) * 1000) / 10;
    const own = percent(gained(this.own, ticksOf([...this.own.keys()])));
    const groups = Object.fromEntries(
      this.groups.map(([name, before]) => [name, percent(gained(before, ticksOf([...before.keys()])))]),
    );
    let busiestThread = null;
    if (this.threads) {
      const after = this.threadTicks();
      for (const [tid, t] of after) {
        if (!this.threads.has(tid)) continue;
        const p = percent(t - this.threads.get(tid));
        if (!busiestThread || p > busiestThread.percent) {
          busiestThread = { name: read(`/proc/${this.threadsOf}/task/${tid}/comm`)?.trim() ?? tid, percent: p };
        }
      }
    }
    return {
      seconds,
      cpus: Math.round(cpus),
      machine: machineBusy,
      own,
      others: Math.max(0, Math.round((machineBusy - own) * 10) / 10),
      groups,
      busiestThread,
    };
  }
}

//! What the benchmark drivers share: the stack they drive ([`stack_with_card`], the tests'
//! [`Stack`] with the card and the given binaries), a Janus wired for a control of their own,
//! process figures from `/proc`, percentiles, the machine line of their tables.

use std::path::Path;

use crate::janus::Janus;
use crate::stack::Stack;
use crate::{ICE_IFACE, ReservedPort, require_namespace};

const EVENT_SECRET: &str = "bench-event-secret";

/// The malloc setting of the packaged units (packaging/systemd): the bench measures what is deployed.
const MALLOC_ARENAS: (&str, &str) = ("MALLOC_ARENA_MAX", "2");

/// The whole stack the benchmarks drive, with the card: the given control and bridged binaries
/// (with the packaged units' malloc setting), Janus on [`ICE_IFACE`]; `groups` are the config's
/// `groups:` items, `bridge_jitter_ms` is `bridge.jitterBufferMs`, `bridged_log` bridged's
/// `RUST_LOG`. Inside a network namespace ([`require_namespace`]).
pub async fn stack_with_card(
    control: &Path,
    bridged: &Path,
    groups: &str,
    bridge_jitter_ms: u32,
    bridged_log: &str,
) -> Stack {
    require_namespace();
    let (arenas, count) = MALLOC_ARENAS;
    Stack::builder()
        .janus(Janus::builder().ice_iface(ICE_IFACE))
        .control_binary(control.to_owned())
        .bridged_binary(bridged.to_owned())
        .groups(groups)
        .card(true)
        .bridge(&format!("  jitterBufferMs: {bridge_jitter_ms}\n"))
        .config("logging:\n  level: warn\n")
        .env(arenas, count)
        .bridged_env(arenas, count)
        .bridged_env("RUST_LOG", bridged_log)
        .start()
        .await
}

/// A private Janus on [`ICE_IFACE`] posting its events to control, and control's `server:` and
/// `janus:` sections that go with it (loopback, HTTPS when `tls`), and the events port they
/// name, to be kept while control runs.
pub fn janus_for_control(tls: bool) -> (Janus, String, ReservedPort) {
    janus_built_for_control(Janus::builder(), tls)
}

/// [`janus_for_control`] with Janus from `builder` (its event loops, …).
pub fn janus_built_for_control(builder: crate::janus::Builder, tls: bool) -> (Janus, String, ReservedPort) {
    let events_reserved = ReservedPort::loopback();
    let events_port = events_reserved.port();
    let janus = builder
        .ice_iface(ICE_IFACE)
        .events(&format!("http://127.0.0.1:{events_port}/api/internal/janus-events"), EVENT_SECRET)
        .start();
    let sections = format!(
        "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:{events_port}\n  tls: {tls}\n{}  eventSecret: {EVENT_SECRET}\n",
        janus.config_yaml(),
    );
    (janus, sections, events_reserved)
}

/// What `/proc/PID/status` says of a process's size; zeros once it has gone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessSize {
    /// Resident memory now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// The most resident memory so far (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    pub threads: u64,
    /// Open file descriptors.
    pub fds: usize,
}

fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

pub fn process_size(pid: u32) -> ProcessSize {
    let Some(process) = process(pid) else { return ProcessSize::default() };
    let fds = process.fd_count().unwrap_or(0);
    process.status().map_or(ProcessSize::default(), |status| ProcessSize {
        rss_kib: status.vmrss.unwrap_or(0),
        peak_rss_kib: status.vmhwm.unwrap_or(0),
        threads: status.threads,
        fds,
    })
}

/// The unit of `/proc`'s CPU times: USER_HZ, 100 on every Linux ABI.
pub const CLOCK_TICKS: f64 = 100.0;

/// utime + stime of `pid` in clock ticks ([`CLOCK_TICKS`] per second).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = process(pid).and_then(|p| p.stat().ok()).expect("the process's stat");
    stat.utime + stat.stime
}

/// utime + stime of each of `pid`'s threads in clock ticks, summed by thread name with its
/// digits left out (GStreamer's `udpsrc3:src` and `udpsrc5:src` are one kind of thread).
pub fn thread_ticks(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut by_kind = std::collections::BTreeMap::new();
    let Some(tasks) = process(pid).and_then(|p| p.tasks().ok()) else { return by_kind };
    for stat in tasks.flatten().filter_map(|task| task.stat().ok()) {
        let kind: String = stat.comm.chars().filter(|c| !c.is_ascii_digit()).collect();
        *by_kind.entry(kind).or_default() += stat.utime + stat.stime;
    }
    by_kind
}

/// Every process's CPU ticks now, by pid: utime + stime, and its waited-for children's
/// (cutime + cstime), so that a build's short-lived compilers count in their parent.
pub fn all_process_ticks() -> std::collections::HashMap<u32, u64> {
    let processes = procfs::process::all_processes().into_iter().flatten().flatten();
    let stats = processes.filter_map(|process| process.stat().ok());
    let children = |stat: &procfs::process::Stat| u64::try_from(stat.cutime + stat.cstime).unwrap_or(0);
    stats.filter_map(|stat| Some((u32::try_from(stat.pid).ok()?, stat.utime + stat.stime + children(&stat)))).collect()
}

/// Busy and total jiffies of the whole machine (`/proc/stat`'s first line, without guest time,
/// which user time already counts).
pub fn machine_ticks() -> (u64, u64) {
    use procfs::CurrentSI as _;
    let Ok(stats) = procfs::KernelStats::current() else { return (0, 0) };
    let cpu = stats.total;
    let idle = cpu.idle + cpu.iowait.unwrap_or(0);
    let busy = cpu.user + cpu.nice + cpu.system + cpu.irq.unwrap_or(0) + cpu.softirq.unwrap_or(0);
    let busy = busy + cpu.steal.unwrap_or(0);
    (busy, busy + idle)
}

/// The load average now (1, 5 and 15 minutes), as `/proc/loadavg` writes it.
pub fn load_average() -> String {
    use procfs::Current as _;
    procfs::LoadAverage::current().map_or_else(|_| "?".to_owned(), |l| format!("{} {} {}", l.one, l.five, l.fifteen))
}

/// The machine's CPU model and count, and its load average now, as a markdown sentence.
pub fn machine_line() -> String {
    use procfs::Current as _;
    let info = procfs::CpuInfo::current().ok();
    let model = info.as_ref().and_then(|info| info.model_name(0)).unwrap_or("?").trim().to_owned();
    format!(
        "Machine: {} vCPUs ({model}); load average at the start: {}.",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average()
    )
}

/// Pins every thread of `pid` to `cpu` (`taskset -a`); threads they start later inherit it.
pub fn pin(pid: u32, cpu: u32) {
    let status = std::process::Command::new("taskset")
        .args(["-a", "-pc", &cpu.to_string(), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("taskset (util-linux)");
    assert!(status.success(), "taskset -a -pc {cpu} {pid} failed");
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The `q` quantile of `values` (`q` from 0.0 to 1.0), `None` when there are none.
///
/// Nearest rank: the value of rank ⌈q·n⌉ (counted from 1, held within 1..=n) among the `n`
/// values sorted, so 0.0 gives the minimum, 1.0 the maximum and 0.5 the lower median; always
/// one of the values, never an interpolation. Every bench reports its medians and percentiles
/// by this one rule, so that their figures compare between benches.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    // Less a hair for f64's products: 0.07 × 100 is 7.000000000000001, still rank 7.
    let rank = ((q * sorted.len() as f64 - 1e-9).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The median of `values` by [`quantile`]'s rule (the lower one of an even count), `None` when
/// there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

/// Runs `command` (a `partyline-crew`) to its end: its stdout (the report), its progress left
/// on stderr; killed should the caller give up on it.
pub async fn crew_output(command: &mut tokio::process::Command) -> std::process::Output {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("run partyline-crew")
        .wait_with_output() // (not `output()`, which would capture its progress on stderr too)
        .await
        .expect("partyline-crew's output")
}

#[cfg(test)]
mod tests {
    use super::{median, quantile};

    #[test]
    fn quantile_is_the_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(median(&[]), None);
        let values = [3.0, 1.0, 2.0, 5.0, 4.0];
        assert_eq!(quantile(&values, 0.0), Some(1.0));
        assert_eq!(quantile(&values, 1.0), Some(5.0));
        assert_eq!(median(&values), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        let twenty: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!(quantile(&twenty, 0.95), Some(19.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&hundred, 0.07), Some(7.0));
    }
}

//! Process figures for `GET /api/admin/stats`.

use std::fs;

/// This process's memory, in bytes. The names are those of Node's `process.memoryUsage()`,
/// which the original system reported and its admin pages read (`memory.heapUsed / 1024 / 1024`);
/// the figures are the C allocator's own, which is what holds control's heap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Resident set size, from `/proc/self/status`.
    pub rss: u64,
    /// What the allocator holds from the system in its arenas (in use or free for reuse).
    pub heap_total: u64,
    /// What the program has allocated and not yet freed, in the allocator's arenas.
    pub heap_used: u64,
    /// Large allocations the allocator maps one by one, outside its arenas (in use).
    pub external: u64,
    /// Virtual size, from `/proc/self/status`.
    #[serde(rename = "virtual")]
    pub virtual_size: u64,
}

impl Memory {
    pub fn of_this_process() -> Memory {
        let mut memory = fs::read_to_string("/proc/self/status").map(|s| parse_status(&s)).unwrap_or_default();
        let heap = allocator::figures();
        (memory.heap_total, memory.heap_used, memory.external) = (heap.reserved, heap.in_use, heap.mapped);
        memory
    }
}

/// CPU time this process has used (user and system), in seconds, from `/proc/self/stat`; 0
/// where there is none.
pub fn cpu_seconds_of_this_process() -> f64 {
    fs::read_to_string("/proc/self/stat").ok().and_then(|s| parse_cpu_ticks(&s)).map_or(0.0, |ticks| {
        // The kernel counts in USER_HZ, 100 on every Linux ABI (sysconf's _SC_CLK_TCK).
        ticks as f64 / 100.0
    })
}

/// utime + stime of a `/proc/PID/stat` line: fields 14 and 15, counted after the command's
/// closing parenthesis (the command may hold spaces and parentheses).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_command = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_command.split_whitespace().skip(11);
    Some(fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?)
}

fn parse_status(status: &str) -> Memory {
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .map_or(0, |n| n * 1024)
    };
    Memory { rss: kib("VmRSS:"), virtual_size: kib("VmSize:"), ..Memory::default() }
}

/// The allocator's own figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct HeapFigures {
    /// Bytes the arenas took from the system.
    reserved: u64,
    /// Bytes allocated in the arenas.
    in_use: u64,
    /// Bytes in chunks mapped one by one (large allocations).
    mapped: u64,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod allocator {
    use super::HeapFigures;

    /// glibc's `mallinfo2` (all arenas; glibc 2.33 and later).
    #[allow(unsafe_code)]
    pub(super) fn figures() -> HeapFigures {
        // SAFETY: mallinfo2 takes no arguments, returns a plain struct by value and only reads
        // the allocator's state under its own locks; it has no precondition to uphold.
        let info = unsafe { libc::mallinfo2() };
        let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        HeapFigures { reserved: bytes(info.arena), in_use: bytes(info.uordblks), mapped: bytes(info.hblkhd) }
    }
}

/// Elsewhere (musl, other systems) the allocator says nothing: zeros.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod allocator {
    pub(super) fn figures() -> super::HeapFigures {
        super::HeapFigures::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_past_a_command_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("4242 (x"), None);
    }

    #[test]
    fn parses_proc_status() {
        let status = "Name:\tx\nVmSize:\t  123456 kB\nVmRSS:\t    7890 kB\n";
        let memory = parse_status(status);
        assert_eq!((memory.rss, memory.virtual_size), (7890 * 1024, 123_456 * 1024));
    }

    #[test]
    fn this_process_has_memory() {
        let memory = Memory::of_this_process();
        assert!(memory.rss > 0 && memory.virtual_size >= memory.rss, "{memory:?}");
    }

    /// The heap figures follow what the program allocates: 16 MiB in one block and 10 MiB in
    /// small ones show up, and go when they are freed. (Whether the large block is mapped on its
    /// own or carved from an arena depends on glibc's moving mmap threshold: count both. Other
    /// tests allocate meanwhile: the margins are far above what they move.)
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn heap_figures_follow_allocations() {
        const MIB: u64 = 1 << 20;
        let allocated = |m: &Memory| m.heap_used + m.external;
        let before = Memory::of_this_process();
        assert!(before.heap_used > 0 && before.heap_total >= before.heap_used, "{before:?}");
        let large = vec![1u8; 16 << 20];
        let small: Vec<Vec<u8>> = (0..20_000u32).map(|i| vec![i.to_le_bytes()[0]; 512]).collect();
        let during = Memory::of_this_process();
        assert!(
            during.heap_used >= before.heap_used + 8 * MIB,
            "small blocks live in the arenas: {before:?} → {during:?}"
        );
        assert!(allocated(&during) >= allocated(&before) + 24 * MIB, "{before:?} → {during:?}");
        drop((large, small));
        let after = Memory::of_this_process();
        assert!(allocated(&after) + 24 * MIB <= allocated(&during), "{during:?} → {after:?}");
    }
}

//! Process figures for `GET /api/admin/stats`.

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
        let status = procfs::process::Process::myself().and_then(|me| me.status()).ok();
        let bytes = |kib: Option<u64>| kib.unwrap_or(0) * 1024;
        let heap = allocator::figures();
        Memory {
            rss: bytes(status.as_ref().and_then(|s| s.vmrss)),
            virtual_size: bytes(status.as_ref().and_then(|s| s.vmsize)),
            heap_total: heap.reserved,
            heap_used: heap.in_use,
            external: heap.mapped,
        }
    }
}

/// CPU time this process has used (user and system), in seconds, from `/proc/self/stat`; 0
/// where there is none.
pub fn cpu_seconds_of_this_process() -> f64 {
    let Ok(stat) = procfs::process::Process::myself().and_then(|me| me.stat()) else { return 0.0 };
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
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
    fn this_process_has_used_cpu_time() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(spin.elapsed());
        }
        assert!(cpu_seconds_of_this_process() > 0.0);
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

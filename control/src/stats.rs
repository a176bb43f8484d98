//! Process figures for `GET /api/admin/stats`.

use std::fs;

/// Resident and virtual memory of this process, in bytes, from `/proc/self/status`
/// (zero where that file does not exist).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Memory {
    pub rss: u64,
    #[serde(rename = "virtual")]
    pub virtual_size: u64,
}

impl Memory {
    pub fn of_this_process() -> Memory {
        fs::read_to_string("/proc/self/status").map(|s| parse_status(&s)).unwrap_or_default()
    }
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
    Memory { rss: kib("VmRSS:"), virtual_size: kib("VmSize:") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let status = "Name:\tx\nVmSize:\t  123456 kB\nVmRSS:\t    7890 kB\n";
        assert_eq!(parse_status(status), Memory { rss: 7890 * 1024, virtual_size: 123_456 * 1024 });
    }

    #[test]
    fn this_process_has_memory() {
        let memory = Memory::of_this_process();
        assert!(memory.rss > 0 && memory.virtual_size >= memory.rss, "{memory:?}");
    }
}

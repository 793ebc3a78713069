//! Facts about this process that the benchmarks report.

/// This process's peak resident memory so far (Linux's VmHWM), in KiB.
pub fn peak_resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

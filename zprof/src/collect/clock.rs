//! The clock the eBPF side stamps events with, read from user space.

/// CLOCK_MONOTONIC now, in ns: the clock of bpf_ktime_get_ns, which stamps
/// the events (and a gone pool's removal).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

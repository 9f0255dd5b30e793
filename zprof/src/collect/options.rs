//! What a session is asked for, and the error of a machine that cannot
//! trace as asked: shared by the session and the loader, below both.

/// This machine cannot trace as asked, for a reason its admin can fix (no
/// permission, a missing mount): the CLI's "bad input" exit status.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CannotTrace(pub String);

/// Options that shape a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Only count these processes (and their children); `None` for all.
    pub filter_pids: Option<Vec<u32>>,
    /// Histogram map size.
    pub hist_entries: u32,
    /// CPU samples per second per CPU (0: no CPU sampling).
    pub sample_hz: u64,
    /// Stacks kept per drain period of CPU samples (`None`: from the rate).
    pub stack_entries: Option<u32>,
    /// Time every workload operation (a probe pair per op) even on uprobes.
    pub full_timing: bool,
    /// Stage groups to leave out.
    pub skip: Vec<String>,
    /// Trace where threads block (sched_switch), for off-CPU flame graphs.
    pub off_cpu: bool,
    /// Stream each request at least this long, with its stage breakdown.
    pub slower_than: Option<std::time::Duration>,
    /// Request map size.
    pub request_rows: u32,
}

//! A pool's recording cut into its benchmark's phases: each job's measured
//! window (the benchmark's JSON says when it ran) against the time outside
//! every job (layout writes, warm-up reads, the gaps between jobs), so a
//! finding can say which phase it describes. The cut is by the recording's
//! per-pool seconds; a second mostly on both sides of a job's start or end
//! belongs to neither and is kept apart.

use crate::recording::{PoolSecond, Recording};

/// Waits, and their time, in one phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    /// Calls.
    pub count: u64,
    /// Their time, ns.
    pub ns: u64,
}

impl Waits {
    fn add(&mut self, second: &PoolSecond) {
        self.count += second.tx_waits;
        self.ns += second.tx_wait_ns;
    }
}

/// The write throttle's waits on one pool, by phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThrottlePhases {
    /// Per job (its name), the waits in seconds wholly inside its window.
    pub jobs: Vec<(String, Waits)>,
    /// In seconds outside every job's window.
    pub outside: Waits,
    /// In seconds that straddle a job's start or end.
    pub boundary: Waits,
}

/// Where a second lies against the jobs' windows.
enum Place {
    Inside(usize),
    Outside,
    Boundary,
}

/// The throttle's waits in `rec` (one pool's part of a recording) by phase,
/// or `None` when its jobs do not say when they ran or the recording has no
/// per-pool seconds.
pub fn throttle_phases(rec: &Recording) -> Option<ThrottlePhases> {
    let jobs = job_windows(rec)?;
    if rec.pool_seconds.is_empty() {
        return None;
    }
    let mut phases = ThrottlePhases {
        jobs: jobs
            .iter()
            .map(|(name, _)| (name.clone(), Waits::default()))
            .collect(),
        ..ThrottlePhases::default()
    };
    for second in &rec.pool_seconds {
        match place(second.second, &jobs) {
            Place::Inside(job) => phases.jobs[job].1.add(second),
            Place::Outside => phases.outside.add(second),
            Place::Boundary => phases.boundary.add(second),
        }
    }
    Some(phases)
}

/// A recording's jobs with their windows, to tell which job a second of
/// the timeline (or of a pool) belongs to.
pub struct JobSeconds {
    jobs: Vec<(String, [f64; 2])>,
}

impl JobSeconds {
    /// `None` when the recording's jobs do not say when they ran.
    pub fn of(rec: &Recording) -> Option<JobSeconds> {
        job_windows(rec).map(|jobs| JobSeconds { jobs })
    }

    /// The jobs' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.jobs.iter().map(|(name, _)| name.as_str())
    }

    /// The job whose window wholly holds second `n` (see [`place`]).
    pub fn job_of(&self, n: u32) -> Option<&str> {
        match place(n, &self.jobs) {
            Place::Inside(job) => Some(self.jobs[job].0.as_str()),
            _ => None,
        }
    }
}

/// Each job's name and window, in seconds since the recording began.
pub(crate) fn job_windows(rec: &Recording) -> Option<Vec<(String, [f64; 2])>> {
    let started = rec.started_unix_ms as f64;
    let jobs: Vec<(String, [f64; 2])> = rec
        .benchmark
        .as_ref()?
        .jobs
        .iter()
        .filter_map(|job| {
            let [start, end] = job.window_unix_ms?;
            Some((
                job.name.clone(),
                [(start as f64 - started) / 1e3, (end as f64 - started) / 1e3],
            ))
        })
        .collect();
    (!jobs.is_empty()).then_some(jobs)
}

/// The part of a second that must lie in a job's window (or outside every
/// window) for its waits to count there: the timeline's seconds start when
/// the recording did, not when a job did, and a job starting 26 ms into a
/// second would otherwise leave that whole second to neither side. At most
/// this share of a second's waits can land on the wrong side.
const SURE_SHARE: f64 = 0.95;

/// Second `n` covers [n - 1, n] seconds after the start.
fn place(n: u32, jobs: &[(String, [f64; 2])]) -> Place {
    let (from, to) = (n as f64 - 1.0, n as f64);
    let overlap = |[start, end]: [f64; 2]| (to.min(end) - from.max(start)).max(0.0);
    let mut inside_any = 0.0;
    for (index, (_, window)) in jobs.iter().enumerate() {
        let part = overlap(*window);
        if part >= SURE_SHARE {
            return Place::Inside(index);
        }
        inside_any += part;
    }
    if inside_any <= 1.0 - SURE_SHARE {
        Place::Outside
    } else {
        Place::Boundary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lab job laid out before 3.25 s and run to 7.26 s (recorded on
    /// this project's VM).
    #[test]
    fn seconds_inside_outside_and_across_a_jobs_window() {
        let jobs = vec![("rr".to_owned(), [3.25, 7.26])];
        assert!(matches!(place(3, &jobs), Place::Outside));
        assert!(matches!(place(4, &jobs), Place::Boundary));
        assert!(matches!(place(5, &jobs), Place::Inside(0)));
        assert!(matches!(place(7, &jobs), Place::Inside(0)));
        assert!(matches!(place(8, &jobs), Place::Boundary));
        assert!(matches!(place(9, &jobs), Place::Outside));
        // A write job that began 26 ms into its first second, then a read
        // job (the same VM): that second is the write job's.
        let jobs = vec![
            ("w".to_owned(), [2.026, 6.153]),
            ("rr".to_owned(), [7.94, 9.942]),
        ];
        assert!(matches!(place(3, &jobs), Place::Inside(0)));
        assert!(matches!(place(7, &jobs), Place::Boundary));
        assert!(matches!(place(8, &jobs), Place::Boundary));
        assert!(matches!(place(9, &jobs), Place::Inside(1)));
    }
}

//! Runs a plan: a sequence of pools, each with its jobs, in one process and
//! one work directory; collects the [`Report`]. Shared by `run` and the
//! named scenarios.

use std::path::PathBuf;

use anyhow::Result;

use crate::job::run_job;
use crate::lab::{self, Lab, Pool, PoolConfig, WorkDir};
use crate::options::{JobSpec, OptError};
use crate::report::{ArcDelta, JobReport, Report, Totals};

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Pools in order, each with the jobs to run on it.
    pub pools: Vec<(PoolConfig, Vec<JobSpec>)>,
    /// Parent of the work directory.
    pub dir: PathBuf,
    /// Keep the work directory (vdev files) at the end.
    pub keep: bool,
    /// Scenario name for the report.
    pub scenario: Option<String>,
    /// ARC cap in bytes (0: ZFS's default, half of the host's memory).
    pub arc_max: u64,
    /// The write throttle's zfs_dirty_data_max in bytes (0: ZFS's default,
    /// a tenth of the host's memory).
    pub dirty_data_max: u64,
}

/// Failure of a run: bad input (exit 2) or a runtime error (exit 1), with
/// whatever was measured before it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The input cannot work (e.g. unwritable directory); nothing was created.
    #[error(transparent)]
    Input(#[from] OptError),
    /// Something failed while running; the partial report is kept.
    #[error("{error:#}")]
    Runtime {
        /// The cause.
        error: anyhow::Error,
        /// What was measured before it.
        partial: Box<Report>,
    },
}

/// A unique pool name for this process: `zlab-<pid>[-<n>]`.
pub fn pool_name(n: usize) -> String {
    if n == 0 {
        format!("zlab-{}", std::process::id())
    } else {
        format!("zlab-{}-{n}", std::process::id())
    }
}

/// Runs the plan; pools are always exported and files removed, even on error.
pub fn execute(
    plan: &Plan,
    progress: bool,
    on_job: impl FnMut(&JobReport),
) -> Result<Report, RunError> {
    let workdir = WorkDir::create(&plan.dir, plan.keep)?;
    if progress {
        let n: usize = plan.pools.iter().map(|p| p.1.len()).sum();
        eprintln!(
            "zprof-lab: running {n} job(s) in {}... Hit Ctrl-C to stop.",
            workdir.path().display()
        );
    }
    let mut report = Report {
        zprof_lab_version: env!("CARGO_PKG_VERSION").to_string(),
        openzfs: crate::OPENZFS.to_owned(),
        scenario: plan.scenario.clone(),
        pools: Vec::new(),
        jobs: Vec::new(),
        totals: Totals::default(),
        interrupted: false,
        checks: Vec::new(),
    };
    let l2arc_fast = plan.pools.iter().any(|(cfg, _)| cfg.caches > 0);
    let lab = match Lab::init(&workdir, plan.arc_max, l2arc_fast) {
        Ok(l) => l,
        Err(error) => {
            return Err(RunError::Runtime {
                error,
                partial: Box::new(report),
            });
        }
    };
    if plan.dirty_data_max > 0 {
        lab.set_dirty_data_max(plan.dirty_data_max);
    }
    let failure = run_pools(&lab, &workdir, plan, &mut report, on_job);
    report.totals = lab_totals();
    drop(lab); // kernel_fini
    report.interrupted = lab::stop_requested();
    drop(workdir);
    match failure {
        Some(error) => Err(RunError::Runtime {
            error,
            partial: Box::new(report),
        }),
        None => Ok(report),
    }
}

/// Creates each pool of the plan in turn and runs its jobs on it, the
/// reports into `report`; stops at a stop request or at the first failure,
/// which it returns (a pool that was created is always finished).
fn run_pools(
    lab: &Lab,
    workdir: &WorkDir,
    plan: &Plan,
    report: &mut Report,
    mut on_job: impl FnMut(&JobReport),
) -> Option<anyhow::Error> {
    let mut failure = None;
    for (cfg, jobs) in &plan.pools {
        if lab::stop_requested() {
            break;
        }
        let mut pool = match Pool::create(lab, workdir.path(), cfg.clone()) {
            Ok(p) => p,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        for spec in jobs {
            if lab::stop_requested() {
                break;
            }
            match run_job(&mut pool, spec) {
                Ok(j) => {
                    on_job(&j);
                    report.jobs.push(j);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        match pool.finish() {
            Ok(info) => report.pools.push(info),
            Err(e) => failure = failure.or(Some(e)),
        }
        if failure.is_some() {
            break;
        }
    }
    failure
}

/// The lab's counters over the whole run (read before the lab is shut down).
fn lab_totals() -> Totals {
    let c = lab::counters();
    let arc = ArcDelta::between(&Default::default(), &lab::arc_stats());
    Totals {
        zil_commits_lab: c.lab_zil_commits,
        zil_commits_all: c.all_zil_commits,
        zil_commits_internal: c.all_zil_commits - c.lab_zil_commits,
        spa_sync_calls: c.spa_syncs,
        host_fsyncs: c.host_fsyncs,
        leaf_ios_queued: c.leaf_ios_queued,
        leaf_flushes: c.leaf_flushes,
        removal_reads: c.removal_reads,
        removal_writes: c.removal_writes,
        arc: Some(arc),
    }
}

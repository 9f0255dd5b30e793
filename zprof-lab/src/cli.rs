//! Command line: `zprof-lab run ...` and `zprof-lab scenario NAME ...`.
//! Every flag is defined once here, with its doc; values are validated while
//! parsing (see `options`), so a bad value exits 2 before anything is created.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::lab::PoolConfig;
use crate::model::ModelParams;
use crate::options::{self, GroupKind, JobSpec, Layout, OptError};
use crate::runner::{Plan, pool_name};
use crate::scenario::{Scenario, ScenarioOptions};

/// A user-space OpenZFS pool (libzpool) on sparse files with emulated disks,
/// driven by fio-style jobs; reports IOPS, latency, ZIL commits and txgs.
#[derive(Debug, Parser)]
#[command(name = "zprof-lab", version = crate::VERSION_LINE)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a pool, run jobs one after another on it, report.
    Run(Box<RunArgs>),
    /// Run a named scenario (several pools and jobs) and explain what to look at.
    Scenario(Box<ScenarioArgs>),
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// fio-like text.
    Normal,
    /// One JSON document (fields in README.md).
    Json,
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct Common {
    /// Parent directory of the run's work directory (vdev files, pool config).
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    /// Keep the work directory and vdev files at the end.
    #[arg(long)]
    pub keep: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
}

/// Pool and dataset options.
#[derive(Debug, Args)]
pub struct PoolArgs {
    /// Data vdevs: stripe:N, mirror:W[xG], raidz1|raidz2|raidz3:W[xG].
    #[arg(long, default_value = "stripe:1", value_parser = parse_layout)]
    pub layout: Layout,
    /// ashift of every vdev (9..16).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(9..=16))]
    pub ashift: u32,
    /// Size of each sparse vdev file (small files make ZFS throttle writes).
    #[arg(long, default_value = "16g", value_parser = parse_vdev_size)]
    pub vdev_size: u64,
    /// Number of log vdevs (SLOG), each one file.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub logs: u32,
    /// Model of the data vdevs: hdd|ssd|nvme|none[:seek=8ms,rpm=7200,rot=4ms,lat=60us,rate=200MiB/s,flush=1ms,qd=4,wc=16MiB|off].
    #[arg(long, default_value = "none", value_parser = parse_model)]
    pub vdev_model: ModelParams,
    /// Model of the log vdevs (same syntax).
    #[arg(long, default_value = "ssd", value_parser = parse_model)]
    pub log_model: ModelParams,
    /// Number of cache devices (L2ARC), each one file; fed without the kernel's
    /// headroom and prefetch limits so that a short run warms them.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub caches: u32,
    /// Size of each cache device's file (default: --vdev-size); at least 64m.
    #[arg(long, value_parser = parse_vdev_size)]
    pub cache_size: Option<u64>,
    /// Model of the cache devices (same syntax).
    #[arg(long, default_value = "ssd", value_parser = parse_model)]
    pub cache_model: ModelParams,
    /// Number of special allocation class vdevs (metadata and small blocks),
    /// each one file.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub specials: u32,
    /// Size of each special vdev's file (default: --vdev-size); at least
    /// 64m. A small one fills, and ZFS puts what it meant for it (metadata)
    /// in the normal class.
    #[arg(long, value_parser = parse_vdev_size)]
    pub special_size: Option<u64>,
    /// Model of the special vdevs (same syntax).
    #[arg(long, default_value = "ssd", value_parser = parse_model)]
    pub special_model: ModelParams,
    /// Expand the first raidz vdev by one file (RAIDZ expansion, OpenZFS 2.3
    /// and later) once the first job's data is laid out: its reflow runs
    /// beside the job, at ZIO_PRIORITY_REMOVAL.
    #[arg(long)]
    pub expand_raidz: bool,
    /// Block size of the data objects (a zvol's volblocksize): 512..1M, power of two.
    #[arg(long, default_value = "8k", value_parser = parse_volblocksize)]
    pub volblocksize: u64,
    /// Dataset compression: off, on, lz4, lzjb, zle, gzip[-N], zstd[-N], zstd-fast[-N].
    #[arg(long, default_value = "off", value_parser = parse_compression)]
    pub compression: String,
    /// Dataset checksum: on, off, fletcher4, sha256, sha512, skein, edonr.
    #[arg(long, default_value = "on", value_parser = parse_checksum)]
    pub checksum: String,
    /// Dataset sync property: standard, always (every write committed), disabled (zil_commit returns at once).
    #[arg(long, default_value = "standard", value_parser = parse_sync)]
    pub sync: String,
    /// Dataset logbias: latency, throughput (every write logged WR_INDIRECT).
    #[arg(long, default_value = "latency", value_parser = parse_logbias)]
    pub logbias: String,
    /// Dataset primarycache: all, metadata (data reads always reach the vdevs), none.
    #[arg(long, default_value = "all", value_parser = parse_primarycache)]
    pub primarycache: String,
    /// Dataset dedup: off, on, verify, sha256[,verify], sha512[,verify], skein[,verify].
    #[arg(long, default_value = "off", value_parser = parse_dedup)]
    pub dedup: String,
    /// Dataset secondarycache (what cache devices keep): all, metadata, none.
    #[arg(long, default_value = "all", value_parser = parse_primarycache)]
    pub secondarycache: String,
}

/// `run` options.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Pool options.
    #[command(flatten)]
    pub pool: PoolArgs,
    /// A job, fio-style: name=N,rw=write|randwrite|read|randread|randrw,bs=4k,size=1g,
    /// runtime=5s,ios=N,numjobs=N,fsync=N,sync=0|1,buffer_compress_percentage=P,rwmixread=P,
    /// dedupe_percentage=P, warmup=N (sequential read passes before a read job).
    /// Repeat to run several jobs one after another on the same pool.
    #[arg(long = "job", required = true, value_name = "SPEC")]
    pub jobs: Vec<String>,
    /// Cap the ARC at this size (64m or more, below half of the host's memory;
    /// default: ZFS's, half of the host's memory). Its floor is set to half of it.
    #[arg(long, value_parser = parse_arc_max)]
    pub arc_max: Option<u64>,
    /// The write throttle's zfs_dirty_data_max (default: ZFS's, a tenth of
    /// the host's memory): writers are delayed from 60% of it on, so a small
    /// value makes a write job meet the throttle on any host.
    #[arg(long, value_parser = parse_dirty_data_max)]
    pub dirty_data_max: Option<u64>,
    /// Common options.
    #[command(flatten)]
    pub common: Common,
}

/// `scenario` options.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// Scenario name (`all`: the three, one after another).
    #[arg(value_enum)]
    pub name: Scenario,
    /// Seconds per timed job (fsync-collapse: each job, default 10; volblocksize: each
    /// random-read job, default 3; compression writes a fixed amount instead, see --size).
    #[arg(long, value_parser = parse_runtime)]
    pub runtime: Option<f64>,
    /// Data per job: compression: bytes written per job (default 512m); volblocksize:
    /// object size per reader (default 32m); fsync-collapse: the random-write extent (default 1g).
    #[arg(long, value_parser = parse_job_size)]
    pub size: Option<u64>,
    /// Override the scenario's compression (fsync-collapse: off, volblocksize: lz4,
    /// compression: run only this one instead of off, lz4, zstd-1, -3, -9, -19).
    #[arg(long, value_parser = parse_compression)]
    pub compression: Option<String>,
    /// Verify the scenario's published shape afterwards: print each criterion with the
    /// measured value and PASS/FAIL; exit 3 if one fails, 4 if none fails but one
    /// cannot be decided here (a device the host delivered slower than its model).
    #[arg(long)]
    pub check: bool,
    /// Model of the data vdevs (default: the scenario's: hdd, compression: ssd).
    #[arg(long, value_parser = parse_model_arg)]
    pub vdev_model: Option<ModelArg>,
    /// Model of the log vdevs (default: ssd).
    #[arg(long, value_parser = parse_model_arg)]
    pub log_model: Option<ModelArg>,
    /// Size of each sparse vdev file.
    #[arg(long, default_value = "16g", value_parser = parse_vdev_size)]
    pub vdev_size: u64,
    /// Print job progress on stderr whatever the output format (used by `all` for
    /// its child processes).
    #[arg(long, hide = true)]
    pub progress: bool,
    /// Common options.
    #[command(flatten)]
    pub common: Common,
}

/// A device model as given on the command line, kept verbatim so that `scenario all`
/// can hand it to its child processes unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelArg {
    /// The text given.
    pub text: String,
    /// What it parses to.
    pub params: ModelParams,
}

impl ScenarioArgs {
    /// What the scenario's plan takes from these options.
    pub fn options(&self) -> ScenarioOptions {
        ScenarioOptions {
            runtime: self.runtime,
            size: self.size,
            compression: self.compression.clone(),
            vdev_model: self.vdev_model.as_ref().map(|m| m.params.clone()),
            log_model: self.log_model.as_ref().map(|m| m.params.clone()),
            vdev_size: self.vdev_size,
            dir: self.common.dir.clone(),
            keep: self.common.keep,
        }
    }

    /// The arguments that run scenario `name` with these options in a child process,
    /// its report as JSON on stdout and its progress on stderr.
    pub fn child_args(&self, name: Scenario) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec!["scenario".into(), name.cli_name().into()];
        let mut opt = |k: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push(k.into());
                v.push(val.into());
            }
        };
        opt("--runtime", self.runtime.map(|r| r.to_string()));
        opt("--size", self.size.map(|x| x.to_string()));
        opt("--compression", self.compression.clone());
        opt(
            "--vdev-model",
            self.vdev_model.as_ref().map(|m| m.text.clone()),
        );
        opt(
            "--log-model",
            self.log_model.as_ref().map(|m| m.text.clone()),
        );
        opt("--vdev-size", Some(self.vdev_size.to_string()));
        opt("--output-format", Some("json".into()));
        v.push("--dir".into());
        v.push(self.common.dir.clone().into_os_string());
        if self.common.keep {
            v.push("--keep".into());
        }
        if self.check {
            v.push("--check".into());
        }
        v.push("--progress".into());
        v
    }
}

fn parse_model_arg(s: &str) -> Result<ModelArg, OptError> {
    Ok(ModelArg {
        text: s.to_string(),
        params: s.parse()?,
    })
}
fn parse_layout(s: &str) -> Result<Layout, OptError> {
    s.parse()
}
fn parse_model(s: &str) -> Result<ModelParams, OptError> {
    s.parse()
}
fn parse_dedup(s: &str) -> Result<String, OptError> {
    options::check_dedup(s).map(|()| s.to_string())
}
fn parse_arc_max(s: &str) -> Result<u64, OptError> {
    let v = options::parse_size(s)?;
    if v < 64 << 20 {
        return Err(OptError(format!("ARC size {s} is below ZFS's 64M minimum")));
    }
    Ok(v)
}
fn parse_dirty_data_max(s: &str) -> Result<u64, OptError> {
    let v = options::parse_size(s)?;
    if v < 1 << 20 {
        return Err(OptError(format!(
            "dirty data max {s} is below 1M: ZFS could not fit a txg's own metadata"
        )));
    }
    Ok(v)
}
fn parse_vdev_size(s: &str) -> Result<u64, OptError> {
    let v = options::parse_size(s)?;
    if v < 64 << 20 {
        return Err(OptError(format!(
            "vdev size {s} is below the 64M minimum of a vdev"
        )));
    }
    Ok(v)
}
fn parse_volblocksize(s: &str) -> Result<u64, OptError> {
    let v = options::parse_size(s)?;
    options::check_volblocksize(v)?;
    Ok(v)
}
fn parse_compression(s: &str) -> Result<String, OptError> {
    options::check_compression(s).map(|()| s.to_string())
}
fn parse_checksum(s: &str) -> Result<String, OptError> {
    options::check_checksum(s).map(|()| s.to_string())
}
fn parse_sync(s: &str) -> Result<String, OptError> {
    options::check_sync(s).map(|()| s.to_string())
}
fn parse_logbias(s: &str) -> Result<String, OptError> {
    options::check_logbias(s).map(|()| s.to_string())
}
fn parse_primarycache(s: &str) -> Result<String, OptError> {
    options::check_primarycache(s).map(|()| s.to_string())
}
fn parse_job_size(s: &str) -> Result<u64, OptError> {
    let v = options::parse_size(s)?;
    if v < 1 << 20 {
        return Err(OptError(format!("size {s} is below 1m")));
    }
    Ok(v)
}
fn parse_runtime(s: &str) -> Result<f64, OptError> {
    let v = options::parse_duration_ns(s)? as f64 / 1e9;
    if v <= 0.0 {
        return Err(OptError("runtime must be > 0".into()));
    }
    Ok(v)
}

impl PoolArgs {
    /// The pool configuration these options describe.
    pub fn config(&self, name: String) -> PoolConfig {
        let props: BTreeMap<String, String> = [
            ("compression", &self.compression),
            ("checksum", &self.checksum),
            ("sync", &self.sync),
            ("logbias", &self.logbias),
            ("primarycache", &self.primarycache),
            ("secondarycache", &self.secondarycache),
            ("dedup", &self.dedup),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
        PoolConfig {
            name,
            layout: self.layout.clone(),
            ashift: self.ashift,
            vdev_size: self.vdev_size,
            vdev_model: self.vdev_model.clone(),
            logs: self.logs,
            log_model: self.log_model.clone(),
            caches: self.caches,
            cache_size: self.cache_size,
            special_size: self.special_size,
            cache_model: self.cache_model.clone(),
            specials: self.specials,
            special_model: self.special_model.clone(),
            expand_raidz: self.expand_raidz,
            props,
            volblocksize: self.volblocksize,
        }
    }
}

impl PoolArgs {
    /// `--expand-raidz` needs a raidz layout and a release with RAIDZ
    /// expansion: refused before any pool is made.
    fn check_expansion(&self) -> Result<(), OptError> {
        if !self.expand_raidz {
            return Ok(());
        }
        if self.layout.kind != GroupKind::Raidz {
            return Err(OptError(
                "--expand-raidz expands a raidz vdev: give --layout raidz1|raidz2|raidz3:W".into(),
            ));
        }
        if crate::OPENZFS.starts_with("2.1.") || crate::OPENZFS.starts_with("2.2.") {
            return Err(OptError(format!(
                "--expand-raidz: RAIDZ expansion came in OpenZFS 2.3; this zprof-lab is built against {} (build one with ZPROF_LAB_OPENZFS=2.3.2 or later)",
                crate::OPENZFS
            )));
        }
        Ok(())
    }
}

impl RunArgs {
    /// The plan for `run`: one pool, the jobs in order.
    pub fn plan(&self) -> Result<Plan, OptError> {
        let jobs = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, s)| JobSpec::parse(s, i))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = std::collections::HashSet::new();
        for j in &jobs {
            if !seen.insert(j.name.as_str()) {
                return Err(OptError(format!("job name '{}' is used twice", j.name)));
            }
            if j.size > self.pool.vdev_size * self.pool.layout.data_files() as u64 {
                return Err(OptError(format!(
                    "job {}: size is larger than the pool",
                    j.name
                )));
            }
        }
        self.pool.check_expansion()?;
        Ok(Plan {
            pools: vec![(self.pool.config(pool_name(0)), jobs)],
            dir: self.common.dir.clone(),
            keep: self.common.keep,
            scenario: None,
            arc_max: self.arc_max.unwrap_or(0),
            dirty_data_max: self.dirty_data_max.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("zprof-lab").chain(args.iter().copied()))
    }

    #[test]
    fn run_flags() {
        let cli = parse(&[
            "run",
            "--layout",
            "raidz2:6",
            "--vdev-model",
            "hdd:seek=4ms",
            "--logs",
            "1",
            "--compression",
            "zstd-3",
            "--job",
            "name=a,rw=randwrite",
            "--job",
            "name=b,fsync=1",
            "--output-format",
            "json",
        ])
        .unwrap();
        let Command::Run(r) = cli.command else {
            panic!("not run")
        };
        let plan = r.plan().unwrap();
        let (cfg, jobs) = &plan.pools[0];
        assert_eq!(
            (cfg.layout.nparity, cfg.logs, cfg.vdev_model.seek_ns),
            (2, 1, 4_000_000)
        );
        assert_eq!(cfg.props["compression"], "zstd-3");
        assert_eq!(jobs.len(), 2);
        assert_eq!(r.common.output_format, OutputFormat::Json);
    }

    #[test]
    fn bad_values_are_rejected_by_the_parser() {
        assert!(parse(&["run", "--layout", "raidz3:3", "--job", "rw=write"]).is_err());
        assert!(parse(&["run", "--compression", "lz5", "--job", "rw=write"]).is_err());
        assert!(parse(&["run", "--ashift", "20", "--job", "rw=write"]).is_err());
        assert!(parse(&["run"]).is_err()); // no job
        assert!(
            parse(&["run", "--arc-max", "32m", "--job", "rw=read"]).is_err(),
            "below ZFS's 64M minimum"
        );
        assert!(parse(&["run", "--caches", "9", "--job", "rw=read"]).is_err());
        assert!(parse(&["run", "--secondarycache", "data", "--job", "rw=read"]).is_err());
        let Command::Run(r) = parse(&[
            "run",
            "--arc-max",
            "1g",
            "--caches",
            "2",
            "--job",
            "rw=read",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        let plan = r.plan().unwrap();
        assert_eq!((plan.arc_max, plan.pools[0].0.caches), (1 << 30, 2));
        let Command::Run(r) = parse(&["run", "--job", "name=a", "--job", "name=a"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert!(r.plan().is_err());
    }

    #[test]
    fn scenario_flags() {
        let cli = parse(&["scenario", "fsync-collapse", "--runtime", "2"]).unwrap();
        let Command::Scenario(s) = cli.command else {
            panic!()
        };
        assert_eq!(
            (s.name, s.runtime, s.check),
            (Scenario::FsyncCollapse, Some(2.0), false)
        );
        let cli = parse(&[
            "scenario",
            "volblocksize",
            "--check",
            "--size",
            "8m",
            "--compression",
            "zstd-3",
        ])
        .unwrap();
        let Command::Scenario(s) = cli.command else {
            panic!()
        };
        assert_eq!(
            (s.name, s.size, s.check),
            (Scenario::Volblocksize, Some(8 << 20), true)
        );
        let plan = crate::scenario::plan(&s.options(), s.name);
        assert_eq!(plan.pools.len(), 8);
        assert!(
            plan.pools
                .iter()
                .all(|(c, j)| c.props["compression"] == "zstd-3"
                    && c.props["primarycache"] == "metadata"
                    && j[0].size == 8 << 20)
        );
        assert_eq!(plan.pools[7].0.volblocksize, 1 << 20);
        let Command::Scenario(all) = parse(&[
            "scenario",
            "all",
            "--check",
            "--vdev-model",
            "hdd:rpm=5400",
            "--runtime",
            "2.5",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(all.name, Scenario::All);
        // The child gets the same options back, verbatim, and they parse.
        let child = all.child_args(Scenario::Volblocksize);
        let Command::Scenario(c) =
            Cli::try_parse_from(std::iter::once("zprof-lab".into()).chain(child))
                .unwrap()
                .command
        else {
            panic!()
        };
        assert_eq!(
            (c.name, c.runtime, c.check, c.progress),
            (Scenario::Volblocksize, Some(2.5), true, true)
        );
        assert_eq!(c.vdev_model, all.vdev_model);
        assert_eq!(c.common.output_format, OutputFormat::Json);
        assert!(parse(&["scenario", "compression", "--compression", "lz5"]).is_err());
        assert!(parse(&["scenario", "nope"]).is_err());
    }
}

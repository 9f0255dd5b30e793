//! Command-line definitions: every flag once, with its help and its parser,
//! and a unit test beside the parsers.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{recording::requests::GroupBy, render::flamegraph::FlameKind, zfs::target::TargetSpec};

/// Per-stage latency profiler for OpenZFS (zfs.ko or libzpool), built on eBPF.
#[derive(Debug, Parser)]
#[command(name = "zprof", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// zprof's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every stage, its probe points, and whether each attaches here (and why not).
    Probes(ProbesArgs),
    /// Attach, run a command (or wait for --duration or Ctrl-C), detach, print the stage report.
    Record(RecordArgs),
    /// Record around a benchmark (fio, zprof-lab) and show its own result beside the stages and findings.
    Run(RecordArgs),
    /// Render a saved recording again.
    Report(ReportArgs),
    /// Findings from a recording: what bounds the workload, with evidence and what to do.
    Explain(ExplainArgs),
    /// Two recordings side by side, stage by stage, with the findings that changed.
    Compare(CompareArgs),
    /// A flame graph (SVG) or folded stacks from a recording: stage time or CPU samples.
    Flamegraph(FlamegraphArgs),
    /// Struct offsets for a zfs.ko without BTF, compiled from its dkms tree and
    /// kernel headers (what record does by itself when it can; cached per module build).
    Offsets(OffsetsArgs),
    /// Attach once and serve every stage at /metrics for Prometheus, until SIGTERM.
    Serve(ServeArgs),
    /// A live view of the stages, refreshed every second (keys: p pool, s sort, f finding, q quit).
    Top(TopArgs),
    /// Man pages or shell completions, from these very definitions (for packagers).
    Generate(GenerateArgs),
}

/// `zprof generate`: what to write.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    /// Man pages or completions.
    pub what: Generate,
}

/// `zprof generate`'s outputs.
#[derive(Debug, Subcommand)]
pub enum Generate {
    /// A man page per command (zprof.1, zprof-record.1, ...) in DIR.
    Man {
        /// Directory to write the pages to (created if missing).
        dir: PathBuf,
    },
    /// The completion script for SHELL, on standard output.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `zprof top`: the live view.
#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    /// What to attach, as `serve` does.
    pub attach: LiveArgs,
    /// Refresh interval (e.g. 1s, 500ms).
    #[arg(long, short = 'i', default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
}

/// What the long-running views (`serve`, `top`) attach: every process of
/// the target, no CPU sampling.
#[derive(Debug, Args)]
pub struct LiveArgs {
    #[command(flatten)]
    /// Target selection.
    pub target: TargetArgs,
    /// Size of the in-kernel histogram map (distinct stage/class/pool/vdev keys).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub hist_entries: u32,
    /// Time every workload read and write, tx assign and block checksum (see
    /// record --full-timing; a uprobe pair per call on libzpool).
    #[arg(long)]
    pub full_timing: bool,
    /// Leave these stage groups out (as record --skip).
    #[arg(long, value_delimiter = ',', value_parser = parse_group)]
    pub skip: Vec<String>,
    /// How long an exported or destroyed pool's series stay after its export
    /// (so that every scraper sees their last values), then they end.
    #[arg(long, default_value = "5m", value_parser = parse_forget_after)]
    pub forget_after: Duration,
}

/// How long a gone pool's rows stay: from 1 s to a day.
fn parse_forget_after(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(86_400) {
        return Err(format!("--forget-after {s} is outside 1s..24h"));
    }
    Ok(d)
}

/// A refresh interval: a duration from 100 ms to an hour.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!("interval {s} is outside 100ms..1h"));
    }
    Ok(d)
}

/// `zprof serve`: a long-running Prometheus exporter.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    /// What to attach.
    pub attach: LiveArgs,
    /// Address to serve /metrics on (loopback by default: the stages name
    /// pools and datasets; put a proxy or a firewall in front before widening it).
    #[arg(long, default_value = "127.0.0.1:9929", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
    /// Label vdev rows with their leaf vdev's guid (otherwise a pool's leaves are summed).
    #[arg(long)]
    pub per_vdev: bool,
    /// Stage series exported at most; beyond, a family's series are folded into
    /// one labelled "_other" and counted in zprof_series_folded.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_series: u64,
    /// Web configuration in Prometheus exporter-toolkit's format (as
    /// node_exporter's): tls_server_config, basic_auth_users (bcrypt),
    /// http_server_config.headers, rate_limit. Checked before anything
    /// attaches; re-read on SIGHUP.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config: Option<PathBuf>,
}

/// Options choosing and describing the target.
#[derive(Debug, Args, Clone)]
pub struct TargetArgs {
    /// kernel (zfs.ko via kprobes), libzpool[=PATH] (user-space OpenZFS via uprobes),
    /// or auto: kernel when a zfs module is loaded, else libzpool.
    #[arg(long, default_value = "auto", value_parser = parse_target)]
    pub target: TargetSpec,
    /// Struct offsets table (JSON, see zprof/offsets/README.md) for a build zprof
    /// does not know: a libzpool, or a zfs.ko without BTF (`zprof offsets` makes one).
    #[arg(long, value_name = "FILE")]
    pub offsets: Option<PathBuf>,
    /// The OpenZFS release of the traced build (X.Y.Z), for a build that does
    /// not name it (no version string, unknown build-id, no package). It picks
    /// the rules zprof reads the build with: give it only when you know it.
    #[arg(long, value_name = "X.Y.Z", value_parser = parse_zfs_version)]
    pub zfs_version: Option<String>,
}

fn parse_zfs_version(s: &str) -> Result<String, String> {
    crate::zfs::releases::parse_version(s)
        .map(|(a, b, c)| format!("{a}.{b}.{c}"))
        .ok_or_else(|| format!("'{s}' is not an OpenZFS version: expected X.Y.Z, e.g. 2.3.2"))
}

/// `zprof probes`.
#[derive(Debug, Args)]
pub struct ProbesArgs {
    #[command(flatten)]
    /// Target selection.
    pub target: TargetArgs,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// `zprof offsets`.
#[derive(Debug, Args)]
pub struct OffsetsArgs {
    /// The module file the table is for (default: the loaded zfs.ko): its
    /// build-id keys the table, its vermagic names its kernel.
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,
    /// The configured OpenZFS tree that built it (default: /var/lib/dkms/zfs/VERSION/build).
    #[arg(long, value_name = "DIR")]
    pub zfs_build: Option<PathBuf>,
    /// The kernel's build directory (default: the one the tree was configured with,
    /// else /lib/modules/RELEASE/build).
    #[arg(long, value_name = "DIR")]
    pub kernel_build: Option<PathBuf>,
    /// Write the table here (default: zprof's cache, where record finds it).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `zprof record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    /// Target selection.
    pub target: TargetArgs,
    /// Only count this process (and processes it forks from now on): a benchmark
    /// that is already running. Stops when it exits, or after --duration.
    #[arg(
        long,
        short = 'p',
        visible_alias = "attach",
        value_name = "PID",
        conflicts_with = "command"
    )]
    pub pid: Option<u32>,
    /// Stop after this long (e.g. 10, 10s, 500ms, 2m). Without it: until the command
    /// exits, the pid exits, or Ctrl-C.
    #[arg(long, short = 'd', value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Write the recording (JSON) to this file.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Format of the report printed at the end.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Size of the in-kernel histogram map (distinct stage/class/pool/vdev keys).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub hist_entries: u32,
    /// Rows of the requests map (distinct layer, operation, dataset, process and
    /// cgroup); requests beyond them are folded into one row and counted.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub request_rows: u32,
    /// On-CPU samples per second on each CPU, for CPU flame graphs (0: none).
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub sample_freq: u64,
    /// Distinct stacks kept per 250 ms of CPU samples (drained every 250 ms).
    /// Default: 256 per sample expected in 250 ms, 4,096 to 65,536, so that
    /// fewer than 1% of samples lose their stack; raise it if the report shows more.
    #[arg(long, value_parser = clap::value_parser!(u32).range(64..=1_000_000))]
    pub stack_storage_size: Option<u32>,
    /// Time every call of the high-rate functions: workload reads/writes, tx
    /// assigns, block checksums (a uprobe pair per call, about 1.5 us on
    /// libzpool). Without it workload reads/writes are counted at entry only,
    /// tx assigns and block checksums are not probed, and checksum CPU time
    /// comes from the CPU samples. Kprobes are cheap: the kernel target always
    /// times them.
    #[arg(long)]
    pub full_timing: bool,
    /// Leave these stage groups out (comma-separated: workload, throttle,
    /// compression, checksum, reads, vdev, flush, zil, txg), e.g. to take the per-write
    /// uprobe off a benchmark that reports its own throughput.
    #[arg(long, value_delimiter = ',', value_parser = parse_group)]
    pub skip: Vec<String>,
    /// Also write a flame graph (.svg, or .folded for folded stacks).
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// What the flame graph shows.
    #[arg(long, value_enum, default_value = "stages")]
    pub flamegraph_kind: FlameKindArg,
    /// Predict with this log device: slog=ssd, slog=nvme, slog=LATENCY[,rate=RATE][,flush=LATENCY];
    /// or this cache for reads: l2arc=SIZE[,ssd|nvme], arc=+SIZE. Repeatable.
    /// Default: ssd and nvme log devices, an ssd cache holding the data read from disk.
    #[arg(long = "what-if", value_name = "SPEC", value_parser = crate::analyze::findings::parse_what_if)]
    pub what_if: Vec<crate::analyze::findings::WhatIf>,
    /// Do not echo the command's standard output (`run` still reads the
    /// benchmark's result from it): for benchmarks whose JSON would bury the report.
    #[arg(long)]
    pub quiet_command: bool,
    /// Do not print findings after the report.
    #[arg(long)]
    pub no_explain: bool,
    /// How the requests section groups file and zvol requests.
    #[arg(long, value_enum, default_value = "dataset")]
    pub by: GroupByArg,
    /// List the requests at least this long (e.g. 10ms), each with the stages
    /// its thread waited in while it ran (zil_commit and its log write, flush;
    /// txg_wait_synced; the throttle).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub slower_than: Option<Duration>,
    /// Also record where the traced threads block (sched_switch, with stacks),
    /// for `--flamegraph-kind off-cpu`.
    #[arg(long)]
    pub off_cpu: bool,
    /// The command to run and trace (after --). Its exit status becomes zprof's.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `zprof report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A recording written by `zprof record -o`.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// How the requests section groups file and zvol requests.
    #[arg(long, value_enum, default_value = "dataset")]
    pub by: GroupByArg,
    /// Only this pool (repeatable). Rows that name no pool (compression,
    /// dedup lookups, the kernel's file reads and writes) stay: they cannot
    /// be split.
    #[arg(long = "pool", value_name = "NAME")]
    pub pools: Vec<String>,
    /// One row per txg instead of the stage table: its dirty bytes and how
    /// long it stayed open, quiescing, waiting and syncing (as the txgs
    /// kstat shows them), beside spa_sync's time.
    #[arg(long)]
    pub txgs: bool,
}

/// `zprof explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A recording written by `zprof record -o` or `zprof run -o`.
    pub file: PathBuf,
    /// Predict with this log device: slog=ssd, slog=nvme, slog=LATENCY[,rate=RATE][,flush=LATENCY];
    /// or this cache for reads: l2arc=SIZE[,ssd|nvme], arc=+SIZE. Repeatable.
    #[arg(long = "what-if", value_name = "SPEC", value_parser = crate::analyze::findings::parse_what_if)]
    pub what_if: Vec<crate::analyze::findings::WhatIf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Only the findings about this pool (repeatable), and those computed
    /// over several pools that include it.
    #[arg(long = "pool", value_name = "NAME")]
    pub pools: Vec<String>,
}

/// `zprof compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline recording.
    pub a: PathBuf,
    /// The recording to compare with it.
    pub b: PathBuf,
    /// More recordings of the same workload under other settings (a zfs
    /// recv of one stream into each compression setting): with any, one row
    /// per recording (wall time, bytes written, bytes the leaves wrote,
    /// compression's CPU, leaf bytes saved per second more than A's) in
    /// place of the stage table.
    pub more: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write a differential flame graph (.svg, or .folded with both
    /// counts): B's stacks, red where B spends more per workload operation
    /// than A, blue where less.
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// What the differential flame graph shows.
    #[arg(long, value_enum, default_value = "cpu")]
    pub flamegraph_kind: FlameKindArg,
    /// Only this pool (repeatable). Rows that name no pool (compression,
    /// dedup lookups, the kernel's file reads and writes) stay: they cannot
    /// be split.
    #[arg(long = "pool", value_name = "NAME")]
    pub pools: Vec<String>,
}

/// Kinds of flame graph, as `--kind` spells them (render's [`FlameKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlameKindArg {
    /// Wall-clock time per stage (compression, checksum, queue, disk, ZIL...).
    Stages,
    /// On-CPU stack samples of the workload and ZFS's threads.
    Cpu,
    /// Where the traced threads were blocked, weighted by time (record --off-cpu).
    OffCpu,
    /// On-CPU and off-CPU time together, under a root per kind of time
    /// (compression, checksums, waiting for the ZIL, ...); idle threads left
    /// out (record --off-cpu).
    Wall,
    /// The workload's stage time, its waits for txg sync split by what the
    /// syncs did (their phases; the write-out by compression, checksums and
    /// the busiest disk): compression or I/O for a zfs recv.
    Workload,
}

/// `zprof flamegraph`.
#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// A recording written by `zprof record -o`.
    pub file: PathBuf,
    /// What to show.
    #[arg(long, value_enum, default_value = "stages")]
    pub kind: FlameKindArg,
    /// Output: .svg for a flame graph, .folded for folded stacks (other
    /// tools), .pb.gz for a pprof profile (go tool pprof, Pyroscope, Parca).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// What to write, whatever the output's name (default: from its name).
    #[arg(long, value_enum)]
    pub format: Option<FlameFormat>,
    /// Only the stacks of processes of this name (repeatable; cpu, off-cpu and
    /// wall kinds), e.g. the benchmark without ZFS's idle taskq threads.
    #[arg(long, value_name = "NAME")]
    pub process: Vec<String>,
    /// Only this pool's stage time (stages and workload kinds: stacks are not
    /// kept per pool).
    #[arg(long, value_name = "POOL")]
    pub pool: Option<String>,
}

/// What a flame graph's file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlameFormat {
    /// A flame graph (SVG).
    Svg,
    /// Folded stacks, one line each with its weight (inferno, flamegraph.pl).
    Folded,
    /// A gzipped pprof profile (profile.proto) for `go tool pprof`, Grafana
    /// Pyroscope and Parca.
    Pprof,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// JSON for programs.
    Json,
}

/// Parses a stage group name (`--skip`).
pub fn parse_group(s: &str) -> Result<String, String> {
    if crate::zfs::catalogue::GROUPS.iter().any(|(g, _)| *g == s) {
        Ok(s.to_owned())
    } else {
        let names: Vec<&str> = crate::zfs::catalogue::GROUPS
            .iter()
            .map(|(g, _)| *g)
            .collect();
        Err(format!(
            "unknown stage group '{s}': use {}",
            names.join(", ")
        ))
    }
}

/// Parses `--target`.
pub fn parse_target(s: &str) -> Result<TargetSpec, String> {
    s.parse()
}

/// The longest duration accepted: beyond it, deadlines overflow the clock.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 86400);

/// Parses a duration: plain seconds, or a number with ms, s, m or h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "invalid duration '{s}': use seconds (10), or a number with ms, s, m or h (500ms, 2m)"
        )
    };
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(bad()),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(format!("invalid duration '{s}': must be greater than zero"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!("invalid duration '{s}': at most 366 days (8784h)"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(
            parse_duration("10x")
                .unwrap_err()
                .contains("invalid duration '10x'")
        );
        assert!(parse_duration("").is_err());
        assert!(
            parse_duration("0")
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(parse_duration("-3").is_err());
        // Issue 14: these panicked (one while parsing, one after attaching).
        assert!(
            parse_duration("100000000000000000000")
                .unwrap_err()
                .contains("at most 366 days")
        );
        assert!(
            parse_duration("10000000000000000000")
                .unwrap_err()
                .contains("at most 366 days")
        );
        assert_eq!(parse_duration("8784h").unwrap(), MAX_DURATION);
    }

    #[test]
    fn record_takes_command_after_double_dash() {
        let cli = Cli::try_parse_from(["zprof", "record", "-d", "5", "--", "ztest", "-V"]).unwrap();
        let Command::Record(args) = cli.command else {
            panic!("not record")
        };
        assert_eq!(args.command, ["ztest", "-V"]);
        assert_eq!(args.duration, Some(Duration::from_secs(5)));
    }

    #[test]
    fn run_takes_attach_and_what_if() {
        let cli = Cli::try_parse_from([
            "zprof",
            "run",
            "--attach",
            "42",
            "-d",
            "3",
            "--what-if",
            "slog=0.1ms",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.pid, Some(42));
        assert_eq!(args.what_if.len(), 1);
        assert!(
            Cli::try_parse_from(["zprof", "explain", "r.json", "--what-if", "slog=warp"]).is_err()
        );
    }

    #[test]
    fn skip_takes_known_groups() {
        let cli =
            Cli::try_parse_from(["zprof", "record", "--skip", "workload,checksum", "-d", "1"])
                .unwrap();
        let Command::Record(args) = cli.command else {
            panic!("not record")
        };
        assert_eq!(args.skip, ["workload", "checksum"]);
        let err = Cli::try_parse_from(["zprof", "record", "--skip", "disks"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown stage group 'disks'"), "{err}");
    }

    #[test]
    fn pid_and_command_conflict() {
        assert!(Cli::try_parse_from(["zprof", "record", "-p", "1", "--", "true"]).is_err());
    }

    #[test]
    fn bad_target_is_rejected_with_the_choices() {
        let err = Cli::try_parse_from(["zprof", "probes", "--target", "bogus"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("use kernel, libzpool or libzpool=PATH"),
            "{err}"
        );
    }
}

impl From<FlameKindArg> for FlameKind {
    fn from(kind: FlameKindArg) -> FlameKind {
        match kind {
            FlameKindArg::Stages => FlameKind::Stages,
            FlameKindArg::Cpu => FlameKind::Cpu,
            FlameKindArg::OffCpu => FlameKind::OffCpu,
            FlameKindArg::Wall => FlameKind::Wall,
            FlameKindArg::Workload => FlameKind::Workload,
        }
    }
}

/// How the requests section groups its rows, as `--by` spells it (the
/// report's [`GroupBy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupByArg {
    /// One row per dataset or zvol and operation.
    Dataset,
    /// One row per process and operation.
    Process,
    /// One row per cgroup and operation.
    Cgroup,
}

impl From<GroupByArg> for GroupBy {
    fn from(by: GroupByArg) -> GroupBy {
        match by {
            GroupByArg::Dataset => GroupBy::Dataset,
            GroupByArg::Process => GroupBy::Process,
            GroupByArg::Cgroup => GroupBy::Cgroup,
        }
    }
}

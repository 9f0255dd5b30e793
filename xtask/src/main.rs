//! Project jobs cargo cannot do by itself: install the machine's prerequisites,
//! run the main job (a demo on a real user-space ZFS pool), run the whole test
//! suite (which needs root, libzpool and bpf-linker).
//!
//! Every command starts with `setup`, which is idempotent and fast when all is
//! installed, so each README command works on a fresh Debian 12 machine.

use std::{
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

mod bench;
mod deb;
mod guest;
mod layout;
mod ledger;
mod soak;
mod soak_serve;
mod soak_tls;

#[derive(Parser)]
#[command(name = "xtask", about = "zprof project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what zprof needs (apt packages, rust-src, bpf-linker, tracefs). Idempotent.
    Setup,
    /// The main job: record the lab's fsync-collapse scenario under zprof and print the report.
    Demo {
        /// Seconds per lab job.
        #[arg(long, default_value_t = 5)]
        runtime: u32,
    },
    /// Run every test (unit and root integration tests) and print the summary.
    Test,
    /// Overhead benchmark: the lab's jobs alone, under zprof and under bpftrace (same probes).
    Bench {
        /// Rounds of (alone, zprof, naive.bt, same-probes.bt) after the warm-up.
        #[arg(long, default_value_t = 7)]
        rounds: usize,
        /// Only this job (4k-async, 4k-fsync-hdd, 128k-zstd).
        #[arg(long)]
        job: Option<String>,
        /// Only this OpenZFS release (default: the system's and every release
        /// of scripts/openzfs-releases that runs here).
        #[arg(long, value_name = "X.Y.Z")]
        openzfs: Option<String>,
    },
    /// Soak benchmark: zprof recording the lab's mixed workload for a long time;
    /// RSS at 30 s and at the end, zprof's CPU, BPF run time, every loss counter.
    Soak {
        /// Length of the recording.
        #[arg(long, default_value_t = 30)]
        minutes: u64,
        /// Soak `zprof serve` instead, scraped every second: scrape time and size too.
        #[arg(long)]
        serve: bool,
        /// With --serve: a second serve with TLS and basic auth beside it, both
        /// scraped by curl on kept-alive connections, their times compared.
        #[arg(long, requires = "serve")]
        tls: bool,
    },
    /// The kernel-target test rig: OpenZFS's zfs.ko in a qemu guest (build, run, test).
    #[command(subcommand)]
    Guest(guest::GuestCommand),
    /// Check the import graph of each crate's src/: no circle between files, and
    /// zprof's layers (xtask/src/layout.rs) imported downwards only.
    Layout,
    /// The Debian package: zprof, its man pages and completions, the service
    /// unit, the dashboard and rules (target/deb/zprof_VERSION_amd64.deb).
    Deb(deb::DebArgs),
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

/// Cargo's target directory, as cargo would choose it.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: {}", format!("{cmd:?}").replace('"', ""));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{:?} failed with {status}", cmd.get_program());
    }
    Ok(())
}

fn setup() -> anyhow::Result<()> {
    run(&mut Command::new(workspace_root().join("scripts/setup.sh")))
}

/// bpf-linker is installed in ~/.cargo/bin, which a fresh shell may not have on PATH.
fn with_cargo_bin_path(cmd: &mut Command) -> &mut Command {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{home}/.cargo/bin:{path}"))
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    // The tests' ledger of retries, unchecked bounds and known misses (see ledger.rs).
    cmd.env("ZPROF_TEST_LEDGER", ledger::path());
    with_cargo_bin_path(&mut cmd);
    cmd
}

/// The lines of `scripts/openzfs-releases`: version, Debian suite, package
/// version, use.
fn release_lines() -> anyhow::Result<Vec<Vec<String>>> {
    let path = workspace_root().join("scripts/openzfs-releases");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| {
            l.split('#')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|f| f.len() >= 4)
        .collect())
}

/// The cache scripts/setup.sh fills (`$ZPROF_CACHE`, else ~/.cache/zprof):
/// the other OpenZFS releases, and the private apt lists of their suites.
fn setup_cache() -> PathBuf {
    std::env::var_os("ZPROF_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/zprof")
        })
}

/// OpenZFS releases (beside the system's) whose libzpool loads here and
/// that the suite checks, from `scripts/openzfs-releases`.
fn runnable_releases() -> anyhow::Result<Vec<String>> {
    releases_for(&["run"])
}

/// The releases of `scripts/openzfs-releases` of these uses.
fn releases_for(uses: &[&str]) -> anyhow::Result<Vec<String>> {
    Ok(release_lines()?
        .into_iter()
        .filter(|f| uses.contains(&f[3].as_str()))
        .map(|f| f[0].clone())
        .collect())
}

/// The Debian suite and package version `scripts/openzfs-releases` gives for
/// an OpenZFS release (None: not listed, so Debian 12's own).
fn release_source(version: &str) -> anyhow::Result<Option<(String, String)>> {
    Ok(release_lines()?
        .into_iter()
        .find(|f| f[0] == version)
        .map(|f| (f[1].clone(), f[2].clone())))
}

/// Builds zprof-lab against each runnable release and each on trial, into
/// `target/openzfs-VERSION` (the build script links the release's libzpool;
/// see zprof-lab/build.rs).
fn build_release_labs(profile_release: bool) -> anyhow::Result<()> {
    for version in releases_for(&["run", "trial"])? {
        let mut cmd = cargo();
        cmd.args(["build", "-p", "zprof-lab", "--bin", "zprof-lab"])
            .env("ZPROF_LAB_OPENZFS", &version)
            .env(
                "CARGO_TARGET_DIR",
                workspace_root()
                    .join("target")
                    .join(format!("openzfs-{version}")),
            );
        if profile_release {
            cmd.arg("--release");
        }
        run(&mut cmd)?;
    }
    Ok(())
}

/// The releases `cargo xtask bench` runs on: all, or the one asked for.
fn bench_releases(only: Option<&str>) -> anyhow::Result<Vec<bench::BenchRelease>> {
    let all = bench::releases(&workspace_root(), &runnable_releases()?)?;
    match only {
        None => Ok(all),
        Some(version) => {
            let known: Vec<String> = all.iter().map(|r| r.version.clone()).collect();
            let chosen: Vec<_> = all.into_iter().filter(|r| r.version == version).collect();
            if chosen.is_empty() {
                bail!(
                    "--openzfs {version}: the benchmark runs on {}",
                    known.join(", ")
                );
            }
            Ok(chosen)
        }
    }
}

fn demo(runtime: u32) -> anyhow::Result<()> {
    setup()?;
    run(cargo().args(["build", "--release", "-p", "zprof", "-p", "zprof-lab"]))?;
    let root = workspace_root();
    let zprof = root.join("target/release/zprof");
    let lab = root.join("target/release/zprof-lab");
    let recording = root.join("target/demo-fsync-collapse.zprof.json");
    // `zprof run` reads the lab's JSON result and prints it beside the stage
    // table and the findings (sync-write bound, SLOG what-if...).
    run(Command::new(&zprof)
        // The lab's JSON is read by zprof, not shown: its summary heads the findings.
        .args(["run", "--target", "libzpool", "--quiet-command", "-o"])
        .arg(&recording)
        .arg("--")
        .arg(&lab)
        .args([
            "scenario",
            "fsync-collapse",
            "--runtime",
            &runtime.to_string(),
            "--output-format",
            "json",
        ]))?;
    eprintln!(
        "xtask: the recording is {}; render it again with `zprof report {}`",
        recording.display(),
        recording.display()
    );
    Ok(())
}

fn test() -> anyhow::Result<()> {
    setup()?;
    ledger::reset()?;
    // The integration tests (tests/) drive the real binaries of both packages,
    // which they find in the target directory: built here, in the debug profile.
    // Default members: the eBPF crate is built by zprof's build.rs, never for the host.
    run(cargo().args(["build", "--bins"]))?;
    build_release_labs(false)?;
    // The kernel target, on OpenZFS's zfs.ko in a qemu guest (built on first
    // use). First, so that the test runner's summary is the last thing printed.
    let kernel = guest::test_step();
    // Every package but the eBPF one: the default members' unit tests and the
    // integration tests, which default-members leaves out of a plain `cargo test`.
    let packages = ["--workspace", "--exclude", "zprof-ebpf"];
    let nextest = Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .map(|o| o.status.success());
    let tests = if nextest.unwrap_or(false) {
        // nextest runs no doc tests: cargo test runs them, before it.
        let doc = run(cargo()
            .args(["test", "--doc", "--no-fail-fast"])
            .args(packages));
        // One test at a time: the root tests share the machine's uprobes and 2 cores.
        let all = run(cargo()
            .args(["nextest", "run", "--no-fail-fast", "-j", "1"])
            .args(packages));
        doc.and(all)
    } else {
        run(cargo()
            .args(["test", "--no-fail-fast"])
            .args(packages)
            .args(["--", "--test-threads=1"]))
    };
    if let Err(err) = &kernel {
        eprintln!("xtask: the kernel-target (guest) tests failed: {err:#}");
    }
    eprintln!("xtask: {}", ledger::summary());
    kernel.and(tests)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Setup => setup(),
        Task::Demo { runtime } => demo(runtime),
        Task::Test => test(),
        Task::Bench {
            rounds,
            job,
            openzfs,
        } => setup()
            .and_then(|()| {
                run(cargo().args(["build", "--release", "-p", "zprof", "-p", "zprof-lab"]))
            })
            .and_then(|()| build_release_labs(true))
            .and_then(|()| bench_releases(openzfs.as_deref()))
            .and_then(|releases| {
                bench::bench(&workspace_root(), rounds, job.as_deref(), &releases)
            }),
        Task::Soak {
            minutes,
            serve,
            tls,
        } => setup()
            .and_then(|()| {
                run(cargo().args(["build", "--release", "-p", "zprof", "-p", "zprof-lab"]))
            })
            .and_then(|()| {
                if serve {
                    soak_serve::soak_serve(&workspace_root(), minutes, tls)
                } else {
                    soak::soak(&workspace_root(), minutes)
                }
            }),
        Task::Guest(command) => setup().and_then(|()| guest::main(command)),
        Task::Deb(args) => setup().and_then(|()| deb::deb(&args).map(|_| ())),
        Task::Layout => layout::layout(&workspace_root()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

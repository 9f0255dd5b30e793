//! The kernel-target test rig: OpenZFS's real zfs.ko in a qemu guest.
//!
//! The machines zprof is developed on have neither kprobes nor kernel modules, so
//! `zprof record --target kernel` is tested inside a guest: Debian's 6.1 kernel
//! with OpenZFS 2.1.11 modules built here, booted by qemu under software
//! emulation (no KVM needed). Three commands:
//!
//! - `guest build`: fetch the kernel and qemu packages (`apt-get download` and
//!   `dpkg -x`, never installed on the host), build the zfs modules once and keep
//!   them in two variants, with BTF (pahole) and without (as users' dkms builds
//!   are), and pack the initramfs. Every step is cached under the cache directory
//!   and skipped when its inputs are unchanged ([`build`]).
//! - `guest run -- CMD`: boot, run CMD inside, bring `/results` back ([`run`]).
//! - `guest test`: run `guest/zfs-kernel-test.sh` on three variants (module BTF;
//!   no BTF but the offsets `zprof offsets` compiles from the module's build
//!   tree, as on a dkms host; neither) and check what zprof measured against fio
//!   and `zpool iostat`, and the headers' offsets against the BTF's ([`check`]).
//!
//! The cache (`$ZPROF_GUEST_CACHE`, else `~/.cache/zprof-guest`) holds only
//! generated or downloaded files; nothing from Debian or OpenZFS enters the repo.
//! zprof and the guest scripts travel in a small cpio appended at boot, so a
//! change to zprof never rebuilds the big initramfs.

mod build;
mod check;
mod cpio;
mod run;

use std::{
    fmt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand, ValueEnum};

pub use build::Artifacts;

/// `cargo xtask guest ...`.
#[derive(Subcommand)]
pub enum GuestCommand {
    /// Fetch the guest kernel and qemu, build the zfs modules (with and without BTF)
    /// and the initramfs. Cached: only what changed is rebuilt.
    Build(BuildArgs),
    /// Boot the guest and run a command inside (default: the kernel-target test
    /// script); results come back to `--out`.
    Run(RunArgs),
    /// Build if needed, run the kernel-target test on each variant (BTF, headers,
    /// none), and check zprof's figures against fio and `zpool iostat`.
    Test(TestArgs),
    /// Check the results of an earlier run of the test script again (no boot).
    Check {
        /// The run's results directory (e.g. target/guest/test-btf/results).
        results: PathBuf,
        /// The module variant that run used.
        #[arg(long, value_enum)]
        variant: Variant,
    },
}

/// Options shared by every guest command.
#[derive(Args, Clone)]
pub struct BuildArgs {
    /// Put a release build of zprof in the guest (default: the debug build).
    #[arg(long)]
    pub release: bool,
    /// Put this zprof binary in the guest instead of building one.
    #[arg(long, value_name = "PATH")]
    pub zprof: Option<PathBuf>,
}

/// `guest run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Which zfs modules to boot with.
    #[arg(long, value_enum, default_value = "btf")]
    pub variant: Variant,
    /// Kill the guest and fail after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout: u64,
    /// Directory for the console log and the results (default: target/guest/run-VARIANT).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Command run in the guest by its shell, with /payload/guest on PATH
    /// (default: zfs-kernel-test.sh).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `guest test`.
#[derive(Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Seconds each fio job runs in the guest.
    #[arg(long, default_value_t = 8)]
    pub runtime: u32,
    /// Only this variant (default: all three).
    #[arg(long, value_enum)]
    pub variant: Option<Variant>,
}

/// Where zprof gets the module's struct offsets: the two builds of the zfs
/// modules, and for the one without BTF, with or without a table compiled
/// from its build tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Variant {
    /// With BTF (pahole against the kernel's vmlinux): /sys/kernel/btf/zfs exists.
    Btf,
    /// Without BTF, as dkms builds them, with the offsets table `zprof offsets`
    /// compiles from the module's build tree and kernel headers (on the host,
    /// as a dkms host would; the guest has no compiler): in zprof's cache.
    Headers,
    /// Without BTF and without headers (a vendor's built-in zfs.ko): zprof
    /// says what is missing and falls back where it needs offsets.
    Nobtf,
}

impl Variant {
    /// All, in the order tests run them.
    pub const ALL: [Variant; 3] = [Variant::Btf, Variant::Headers, Variant::Nobtf];

    /// The modules it boots with (the build with BTF, or the one without).
    pub fn modules(self) -> &'static str {
        match self {
            Variant::Btf => "btf",
            Variant::Headers | Variant::Nobtf => "nobtf",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Btf => "btf",
            Variant::Headers => "headers",
            Variant::Nobtf => "nobtf",
        })
    }
}

/// Runs a guest command.
pub fn main(command: GuestCommand) -> anyhow::Result<()> {
    match command {
        GuestCommand::Build(args) => {
            let started = Instant::now();
            let artifacts = build::build(&args)?;
            eprintln!("xtask: guest: ready in {:.0?}: {}", started.elapsed(), artifacts.summary());
            Ok(())
        }
        GuestCommand::Run(args) => {
            let artifacts = build::build(&args.build)?;
            let out = args.out.clone().unwrap_or_else(|| run_dir(&format!("run-{}", args.variant)));
            let command = if args.command.is_empty() { vec!["zfs-kernel-test.sh".to_owned()] } else { args.command };
            let outcome =
                run::run(&artifacts, args.variant, &command, &out, Duration::from_secs(args.timeout), run::Echo::All)?;
            eprintln!(
                "xtask: guest: exit status {} after {:.0?}; console log {}, results in {}",
                outcome.status,
                outcome.elapsed,
                outcome.console.display(),
                outcome.results.display()
            );
            if outcome.status != 0 {
                bail!("the guest command failed with exit status {}", outcome.status);
            }
            Ok(())
        }
        GuestCommand::Test(args) => test(&args),
        GuestCommand::Check { results, variant } => {
            eprintln!("xtask: guest check, {variant}:\n{}", check::check(&results, variant)?);
            Ok(())
        }
    }
}

/// Runs the kernel-target test on each variant and checks the results. Called by
/// `cargo xtask test` too.
pub fn test(args: &TestArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let artifacts = build::build(&args.build)?;
    let built = started.elapsed();
    let variants: Vec<Variant> = match args.variant {
        Some(v) => vec![v],
        None => Variant::ALL.to_vec(),
    };
    let mut failures = Vec::new();
    let mut summaries = Vec::new();
    for &variant in &variants {
        let out = run_dir(&format!("test-{variant}"));
        let command = vec!["zfs-kernel-test.sh".to_owned(), format!("--runtime={}", args.runtime)];
        let outcome = run::run(&artifacts, variant, &command, &out, Duration::from_secs(900), run::Echo::Steps)
            .with_context(|| format!("guest run with the {variant} modules"))?;
        if outcome.status != 0 {
            let output = std::fs::read_to_string(outcome.results.join("output.log")).unwrap_or_default();
            let lines: Vec<&str> = output.lines().collect();
            failures.push(format!(
                "{variant}: the guest test script failed with exit status {}; its last lines (all in {}):\n{}",
                outcome.status,
                outcome.console.display(),
                lines[lines.len().saturating_sub(15)..].join("\n")
            ));
            continue;
        }
        match check::check(&outcome.results, variant) {
            Ok(summary) => {
                summaries.push(format!("{variant} ({:.0?} in the guest):\n{summary}", outcome.elapsed));
            }
            Err(err) => failures.push(format!("{variant}: {err:#} (results in {})", outcome.results.display())),
        }
    }
    let results = |v: Variant| run_dir(&format!("test-{v}")).join("results");
    if variants.contains(&Variant::Btf) && variants.contains(&Variant::Headers) && failures.is_empty() {
        match check::headers_match_btf(&results(Variant::Btf), &results(Variant::Headers)) {
            Ok(line) => summaries.push(format!("headers against btf: {line}")),
            Err(err) => failures.push(format!("headers against btf: {err:#}")),
        }
    }
    for summary in &summaries {
        eprintln!("xtask: guest test, {summary}");
    }
    eprintln!("xtask: guest test took {:.0?} (build or cache check {:.0?})", started.elapsed(), built);
    if !failures.is_empty() {
        bail!("guest test failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

/// Where run outputs go: `<target dir>/guest/NAME` (replaced on each run).
fn run_dir(name: &str) -> PathBuf {
    target_dir().join("guest").join(name)
}

/// Cargo's target directory, as cargo would choose it.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"))
}

/// The cache of downloaded and generated guest files.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ZPROF_GUEST_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/root".into());
    home.join(".cache/zprof-guest")
}

/// Creates `dir` afresh (removing what was there).
fn fresh_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// The guest step of `cargo xtask test`: every variant, default settings.
/// `ZPROF_SKIP_GUEST=1` skips it (saying so); CI never sets it.
pub fn test_step() -> anyhow::Result<()> {
    if std::env::var_os("ZPROF_SKIP_GUEST").is_some_and(|v| v != "0") {
        eprintln!("xtask: guest test SKIPPED because ZPROF_SKIP_GUEST is set: the kernel target was not tested");
        return Ok(());
    }
    test(&TestArgs { build: BuildArgs { release: false, zprof: None }, runtime: 8, variant: None })
}

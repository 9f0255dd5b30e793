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
//!   A boot that dies before the script starts ([`run::BootFailure`]) is tried
//!   once more, and so is a run that failed with kernel trouble (an oops) in
//!   its console; both attempts go to the test ledger, so a retry is seen.
//! - `guest boots`: boot each image many times with a trivial command and
//!   count the boots that reach it without kernel trouble ([`boots`]).
//!
//! The cache (`$ZPROF_GUEST_CACHE`, else `~/.cache/zprof-guest`) holds only
//! generated or downloaded files; nothing from Debian or OpenZFS enters the repo.
//! zprof and the guest scripts travel in a small cpio appended at boot, so a
//! change to zprof never rebuilds the big initramfs.

mod boots;
mod build;
mod check;
mod check_benchmarks;
mod check_features;
mod check_pools;
mod check_requests;
mod check_serve;
mod check_special;
mod check_throttle;
mod check_txgs;
mod cpio;
mod results;
mod run;
mod toolchain;

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
    /// Boot each image (each combination's btf and nobtf modules) --count times
    /// with a trivial command; fail if any boot does not reach it cleanly.
    Boots(boots::BootsArgs),
    /// Check the results of an earlier run of the test script again (no boot).
    Check {
        /// The run's results directory (e.g. target/guest/default-2.1.11/test-btf/results).
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
    /// Only this cell of the matrix (e.g. 6.12-2.3.2; default: the first for
    /// build and run, every one for test).
    #[arg(long, value_name = "NAME")]
    pub combination: Option<String>,
}

impl BuildArgs {
    /// The combinations these arguments select (`all`: every one when none is named).
    fn combinations(&self, all: bool) -> anyhow::Result<Vec<Combination>> {
        Ok(match &self.combination {
            Some(name) => vec![Combination::find(name)?],
            None if all => MATRIX.to_vec(),
            None => vec![MATRIX[0]],
        })
    }
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

/// The guest matrix: one line per combination of a Debian kernel and an
/// OpenZFS release whose zfs-dkms source builds the modules. A release other
/// than Debian 12's own (2.1.11) is fetched from the suite
/// scripts/openzfs-releases names for it.
pub const MATRIX: &[Combination] = &[
    Combination {
        kernel: KernelChoice::Default,
        zfs: "2.1.11",
        root: None,
    },
    Combination {
        kernel: KernelChoice::Series("6.12"),
        zfs: "2.3.2",
        root: None,
    },
    Combination {
        kernel: KernelChoice::Pinned(&LINUX_6_17),
        zfs: "2.4.4",
        root: Some("trixie"),
    },
];

/// Linux 6.17 from trixie-backports. Its image is still in the suite's index,
/// but the headers and kbuild of 6.17 left it when 6.18 came (only the
/// signed images of older releases stay listed); all four stay in Debian's
/// pool, fetched from there by name and checked against the digests taken
/// when they were first fetched (2026-12-05).
pub const LINUX_6_17: PinnedKernel = PinnedKernel {
    release: "6.17.13+deb13-amd64",
    files: &[
        (
            "pool/main/l/linux-signed-amd64/linux-image-6.17.13+deb13-amd64_6.17.13-1~bpo13+1_amd64.deb",
            "4c0643e5db69d9248f4139ec0c765671a2585aa53fc498dcc49b102fd5766696",
        ),
        (
            "pool/main/l/linux/linux-headers-6.17.13+deb13-amd64_6.17.13-1~bpo13+1_amd64.deb",
            "752c712768b86b7bbfca7fd94d6b954438b956065ab728db42d71cfae244c762",
        ),
        (
            "pool/main/l/linux/linux-headers-6.17.13+deb13-common_6.17.13-1~bpo13+1_all.deb",
            "85998501828bfb1d3d517ff0e698f8eada209b7642f989fd7e5d47e1912123ab",
        ),
        (
            "pool/main/l/linux/linux-kbuild-6.17.13+deb13_6.17.13-1~bpo13+1_amd64.deb",
            "2b234e8c35bad4bbbd3d0105f4f5350642df17c484d5863cecd78878baa39c3f",
        ),
    ],
};

/// A kernel and an OpenZFS release the guest boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combination {
    /// Which kernel.
    pub kernel: KernelChoice,
    /// OpenZFS release (X.Y.Z).
    pub zfs: &'static str,
    /// The Debian suite whose debootstrapped root builds the modules and gives
    /// the guest its libraries, where this host's cannot (a kernel built with
    /// a newer gcc, tools that need a newer glibc); `None`: this host's.
    pub root: Option<&'static str>,
}

/// How a combination names its kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelChoice {
    /// What Debian 12's linux-image-amd64 depends on ($ZPROF_GUEST_KERNEL overrides).
    Default,
    /// The newest `linux-image-SERIES.N+deb12-amd64` Debian 12's suites carry.
    Series(&'static str),
    /// One release, fetched from Debian's pool by file name.
    Pinned(&'static PinnedKernel),
}

/// A kernel release fetched by its files' pool paths, each with its sha256.
#[derive(Debug, PartialEq, Eq)]
pub struct PinnedKernel {
    /// The release, e.g. 6.17.13+deb13-amd64.
    pub release: &'static str,
    /// Pool path and sha256 of the image, the headers, the common headers and kbuild.
    pub files: &'static [(&'static str, &'static str)],
}

impl PinnedKernel {
    /// "6.17" of "6.17.13+deb13-amd64".
    fn series(&self) -> String {
        self.release
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl Combination {
    /// Short name for directories and logs: "6.12-2.3.2", "default-2.1.11".
    pub fn name(&self) -> String {
        match self.kernel {
            KernelChoice::Default => format!("default-{}", self.zfs),
            KernelChoice::Series(series) => format!("{series}-{}", self.zfs),
            KernelChoice::Pinned(kernel) => format!("{}-{}", kernel.series(), self.zfs),
        }
    }

    /// The combination named `name` (for --combination).
    pub fn find(name: &str) -> anyhow::Result<Combination> {
        MATRIX
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                let names: Vec<String> = MATRIX.iter().map(Combination::name).collect();
                anyhow::anyhow!(
                    "no guest combination '{name}': the matrix has {}",
                    names.join(", ")
                )
            })
    }
}

/// Runs a guest command.
pub fn main(command: GuestCommand) -> anyhow::Result<()> {
    match command {
        GuestCommand::Build(args) => {
            for combination in args.combinations(true)? {
                let started = Instant::now();
                let artifacts = build::build(&args, combination)?;
                eprintln!(
                    "xtask: guest: {} ready in {:.0?}: {}",
                    combination.name(),
                    started.elapsed(),
                    artifacts.summary()
                );
            }
            Ok(())
        }
        GuestCommand::Run(args) => {
            let combination = args.build.combinations(false)?[0];
            let artifacts = build::build(&args.build, combination)?;
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| run_dir(combination, &format!("run-{}", args.variant)));
            let command = if args.command.is_empty() {
                vec!["zfs-kernel-test.sh".to_owned()]
            } else {
                args.command
            };
            let outcome = run::run(
                &artifacts,
                args.variant,
                &command,
                &out,
                Duration::from_secs(args.timeout),
                run::Echo::All,
            )?;
            eprintln!(
                "xtask: guest: exit status {} after {:.0?}; console log {}, results in {}",
                outcome.status,
                outcome.elapsed,
                outcome.console.display(),
                outcome.results.display()
            );
            if outcome.status != 0 {
                bail!(
                    "the guest command failed with exit status {}",
                    outcome.status
                );
            }
            Ok(())
        }
        GuestCommand::Test(args) => test(&args),
        GuestCommand::Boots(args) => boots::boots(&args),
        GuestCommand::Check { results, variant } => {
            eprintln!(
                "xtask: guest check, {variant}:\n{}",
                check::check(&results, variant)?
            );
            Ok(())
        }
    }
}

/// Runs the kernel-target test on each combination and variant and checks the
/// results. Called by `cargo xtask test` too.
pub fn test(args: &TestArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut summaries = Vec::new();
    for combination in args.build.combinations(true)? {
        let built = Instant::now();
        let artifacts = match build::build(&args.build, combination) {
            Ok(artifacts) => artifacts,
            Err(err) => {
                failures.push(format!(
                    "{}: building the guest: {err:#}",
                    combination.name()
                ));
                continue;
            }
        };
        eprintln!(
            "xtask: guest: {} built or checked in {:.0?}",
            combination.name(),
            built.elapsed()
        );
        test_combination(args, combination, &artifacts, &mut summaries, &mut failures);
    }
    for summary in &summaries {
        eprintln!("xtask: guest test, {summary}");
    }
    eprintln!("xtask: guest test took {:.0?}", started.elapsed());
    if !failures.is_empty() {
        bail!("guest test failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

/// How long a guest test run may take before it is killed: about ten times
/// a variant's run here (116-139 s), room for a loaded host.
const GUEST_LIMIT: Duration = Duration::from_secs(1200);

/// The same for a run of every section (685 s alone for the 6.17 cell, the
/// longest).
const GUEST_LIMIT_ALL_SECTIONS: Duration = Duration::from_secs(2100);

/// The guest test script's command line for `variant`, when `variants` run.
fn script_command(args: &TestArgs, variant: Variant, variants: &[Variant]) -> Vec<String> {
    let mut command = vec![
        "zfs-kernel-test.sh".to_owned(),
        format!("--runtime={}", args.runtime),
    ];
    // SIGTERM, kprobe_multi links and serve do not depend on the offsets'
    // source: the BTF variant runs them for the kernel (about 50 s a
    // variant). The headers variant's offsets are checked equal to the
    // BTF's member by member, so one recording with them is enough there
    // (about 100 s less).
    if variants.contains(&Variant::Btf) {
        match variant {
            Variant::Btf => {}
            Variant::Headers => command.push("--sections=offsets".to_owned()),
            Variant::Nobtf => command.push("--sections=variant".to_owned()),
        }
    }
    command
}

/// What to say of a guest run whose test script failed: its exit status
/// and the last lines of its output.
fn script_failure(outcome: &run::Outcome) -> String {
    let output = std::fs::read_to_string(outcome.results.join("output.log")).unwrap_or_default();
    let lines: Vec<&str> = output.lines().collect();
    format!(
        "the guest test script failed with exit status {}; its last lines (all in {}):\n{}",
        outcome.status,
        outcome.console.display(),
        lines[lines.len().saturating_sub(15)..].join("\n")
    )
}

/// One combination's variants, and the headers' offsets against the BTF's.
fn test_combination(
    args: &TestArgs,
    combination: Combination,
    artifacts: &Artifacts,
    summaries: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    let name = combination.name();
    let variants: Vec<Variant> = match args.variant {
        Some(v) => vec![v],
        None => Variant::ALL.to_vec(),
    };
    let failed_before = failures.len();
    for &variant in &variants {
        let command = script_command(args, variant, &variants);
        let run = |attempt: u32| run_variant(combination, variant, artifacts, &command, attempt);
        let case = format!("{name} {variant} run");
        let ledger =
            |outcome: &str, detail: &str| crate::ledger::record("guest", &case, outcome, detail);
        match run_retrying_kernel_trouble(&case, run, ledger) {
            Ok(lines) => summaries.extend(lines),
            Err(failure) => failures.push(format!("{name} {variant}: {failure}")),
        }
    }
    let results = |v: Variant| run_dir(combination, &format!("test-{v}")).join("results");
    if variants.contains(&Variant::Btf)
        && variants.contains(&Variant::Headers)
        && failures.len() == failed_before
    {
        match check::headers_match_btf(&results(Variant::Btf), &results(Variant::Headers)) {
            Ok(line) => summaries.push(format!("{name} headers against btf: {line}")),
            Err(err) => failures.push(format!("{name} headers against btf: {err:#}")),
        }
    }
}

/// A variant's run that failed after its command started.
struct RunFailure {
    /// What failed, with where its logs are.
    message: String,
    /// Kernel trouble lines in its console or dmesg.
    trouble: Vec<String>,
    /// Its console log.
    console: PathBuf,
}

/// Attempts of one variant while each fails with kernel trouble.
const KERNEL_TROUBLE_ATTEMPTS: u32 = 4;

/// Runs one variant (`run`: its attempt number), and again while it fails
/// with kernel trouble in its console or dmesg, [`KERNEL_TROUBLE_ATTEMPTS`]
/// in all. Under software emulation the guest's kernel can oops on its own:
/// an I/O thread calling address 0 (from zio_done as serve's kprobes were
/// removed, CI of 16b56e3; from zio_vdev_io_start, CI of df2bc5d; once more
/// in the CI of ec55f8f), text patched on one emulated vCPU while the other
/// ran it. Two CI runs in a row met one, so a third attempt kept a variant
/// failing twice by chance from failing CI; then one CI's 6.17 btf run
/// oopsed at all three (a call to address 0, two double faults in the slab
/// allocator, none of it seen on this machine in the same run), hence a
/// fourth. Each failure names the script's step and the call trace. The figures of a run whose kernel
/// oopsed say nothing of zprof, so it is run again; every attempt goes to the
/// test ledger with its trouble lines and each failed console is kept, so the
/// retries are seen (`ledger`: outcome, detail). A failure without kernel
/// trouble is never retried. Returns the summary lines of the run that passed.
fn run_retrying_kernel_trouble(
    case: &str,
    mut run: impl FnMut(u32) -> Result<Vec<String>, RunFailure>,
    mut ledger: impl FnMut(&str, &str),
) -> Result<Vec<String>, String> {
    let mut troubles: Vec<String> = Vec::new();
    for attempt in 1..=KERNEL_TROUBLE_ATTEMPTS {
        let failure = match run(attempt) {
            Ok(mut lines) => {
                if !troubles.is_empty() {
                    ledger("pass", &format!("attempt {attempt}: passed"));
                    lines.push(format!(
                        "{case}: passed at attempt {attempt}; the earlier ones had kernel trouble: {}",
                        troubles.join("; ")
                    ));
                }
                return Ok(lines);
            }
            Err(failure) if failure.trouble.is_empty() && troubles.is_empty() => {
                return Err(failure.message);
            }
            Err(failure) => failure,
        };
        if failure.trouble.is_empty() {
            ledger(
                "miss",
                &format!("attempt {attempt}: {}", first_line_of(&failure.message)),
            );
            return Err(format!(
                "{} (earlier attempts failed with kernel trouble: {})",
                failure.message,
                troubles.join("; ")
            ));
        }
        let kept = keep_console(&failure.console, &format!("kernel-trouble-{attempt}"));
        let trouble = failure.trouble.join(" | ");
        ledger(
            "miss",
            &format!(
                "attempt {attempt}: kernel trouble ({trouble}) and the run failed: {} (console kept in {})",
                first_line_of(&failure.message),
                kept.display()
            ),
        );
        eprintln!("xtask: guest: {case}: kernel trouble at attempt {attempt} ({trouble})");
        troubles.push(format!("{trouble} (console in {})", kept.display()));
    }
    Err(format!(
        "{case}: kernel trouble at each of {KERNEL_TROUBLE_ATTEMPTS} attempts: {}",
        troubles.join("; ")
    ))
}

/// One attempt of one variant: boot (retried once if the boot itself dies,
/// [`run_retrying_boot`]), the test script, and the checks of its results.
fn run_variant(
    combination: Combination,
    variant: Variant,
    artifacts: &Artifacts,
    command: &[String],
    attempt: u32,
) -> Result<Vec<String>, RunFailure> {
    let name = combination.name();
    let out = run_dir(combination, &format!("test-{variant}"));
    let console = out.join("console.log");
    let boot_case = format!("{name} {variant} boot");
    // Every section (no --sections=): about 16 minutes in the newest cell,
    // whose real benchmarks take 6 of them.
    let limit = if command.iter().any(|a| a.starts_with("--sections=")) {
        GUEST_LIMIT
    } else {
        GUEST_LIMIT_ALL_SECTIONS
    };
    let boot = || run::run(artifacts, variant, command, &out, limit, run::Echo::Steps);
    let failure = |message: String| RunFailure {
        trouble: trouble_after_failure(&out),
        message,
        console: console.clone(),
    };
    let mut lines = Vec::new();
    let outcome = match run_retrying_boot(&boot_case, &console, boot) {
        Ok((outcome, None)) => outcome,
        Ok((outcome, Some(first))) => {
            lines.push(format!(
                "{name} {variant}: booted at the second attempt; the first: {first}"
            ));
            outcome
        }
        Err(err) => {
            return Err(failure(format!(
                "the guest run failed: {err:#} (console log in {})",
                out.display()
            )));
        }
    };
    if !outcome.trouble.is_empty() {
        lines.push(format!(
            "{name} {variant} (attempt {attempt}): KERNEL TROUBLE in the console or dmesg: {}",
            outcome.trouble.join(" | ")
        ));
    }
    if outcome.status != 0 {
        return Err(failure(script_failure(&outcome)));
    }
    match check::check(&outcome.results, variant) {
        Ok(summary) => {
            lines.push(format!(
                "{name} {variant} ({:.0?} in the guest):\n{summary}",
                outcome.elapsed
            ));
            Ok(lines)
        }
        Err(err) => Err(failure(format!(
            "{err:#} (results in {})",
            outcome.results.display()
        ))),
    }
}

/// The kernel trouble lines of a failed run in `out`: its console and, when
/// the results came back, the guest's dmesg.
fn trouble_after_failure(out: &Path) -> Vec<String> {
    let console = std::fs::read_to_string(out.join("console.log")).unwrap_or_default();
    let mut trouble = run::trouble_lines(&console);
    run::add_dmesg_trouble(&mut trouble, &out.join("results"));
    if let Some(context) = run::oops_context(&console) {
        trouble.push(context);
    }
    trouble
}

/// The first line of a message.
fn first_line_of(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

/// Runs `attempt` (a guest run), and once more if it failed with a
/// [`run::BootFailure`]: the boot died before the command started, which
/// emulation can cause on its own. A failure of the command is returned as it
/// is, never retried. Every attempt is recorded in the test ledger as `case`
/// (pass: the boot reached the command), so a retried boot shows as miss then
/// pass, or as two misses. Returns the first attempt's failure with a pass
/// after a retry.
fn run_retrying_boot(
    case: &str,
    console: &Path,
    mut attempt: impl FnMut() -> anyhow::Result<run::Outcome>,
) -> anyhow::Result<(run::Outcome, Option<String>)> {
    let first = match attempt_once(case, 1, console, attempt()) {
        Ok(result) => return result.map(|outcome| (outcome, None)),
        Err(first) => first_line(&first),
    };
    eprintln!("xtask: guest: {case}: {first}; booting once more");
    match attempt_once(case, 2, console, attempt()) {
        Ok(result) => result.map(|outcome| (outcome, Some(first))),
        Err(second) => {
            Err(second.context(format!("the boot failed twice (the first time: {first})")))
        }
    }
}

/// Records attempt `n` in the ledger; `Err` if it was a boot failure (its
/// console copied beside the run directory, which the next attempt replaces).
fn attempt_once(
    case: &str,
    n: u32,
    console: &Path,
    result: anyhow::Result<run::Outcome>,
) -> Result<anyhow::Result<run::Outcome>, anyhow::Error> {
    let err = match result {
        Ok(outcome) => {
            crate::ledger::record(
                "guest",
                case,
                "pass",
                &format!(
                    "attempt {n}: booted to the command, done after {:.1?}",
                    outcome.done_after
                ),
            );
            return Ok(Ok(outcome));
        }
        Err(err) => err,
    };
    if err.downcast_ref::<run::BootFailure>().is_none() {
        // Not retried: the command started (then failed), or the run could not
        // be set up at all (no boot to judge).
        let text = std::fs::read_to_string(console).unwrap_or_default();
        if run::started_command(&text) {
            crate::ledger::record(
                "guest",
                case,
                "pass",
                &format!("attempt {n}: booted to the command, which failed after it"),
            );
        }
        return Ok(Err(err));
    }
    let kept = keep_console(console, &format!("failed-boot-{n}"));
    crate::ledger::record(
        "guest",
        case,
        "miss",
        &format!(
            "attempt {n}: {} (console kept in {})",
            first_line(&err),
            kept.display()
        ),
    );
    Err(err)
}

/// The first line of an error's message (a BootFailure's ends with the console's tail).
fn first_line(err: &anyhow::Error) -> String {
    first_line_of(&format!("{err}")).to_owned()
}

/// Where run outputs go: `<target dir>/guest/COMBINATION/NAME` (replaced on
/// each run; a failed run's console log stays there for CI to keep).
fn run_dir(combination: Combination, name: &str) -> PathBuf {
    crate::target_dir()
        .join("guest")
        .join(combination.name())
        .join(name)
}

/// The cache of downloaded and generated guest files.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ZPROF_GUEST_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/root".into());
    home.join(".cache/zprof-guest")
}

/// Creates `dir` afresh (removing what was there).
/// Copies a run's console beside its directory, which the next attempt
/// empties: target/guest/COMBINATION/test-VARIANT-WHAT.log.
fn keep_console(console: &Path, what: &str) -> PathBuf {
    let run_dir = console.parent().unwrap_or_else(|| Path::new("."));
    let name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kept = run_dir.with_file_name(format!("{name}-{what}.log"));
    let _ = std::fs::copy(console, &kept);
    kept
}

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
        eprintln!(
            "xtask: guest test SKIPPED because ZPROF_SKIP_GUEST is set: the kernel target was not tested"
        );
        return Ok(());
    }
    // A release zprof: under emulation a debug build's own work (draining and
    // naming stacks, writing the recording) doubled the matrix's time (421 s
    // against 235 s for one variant), far more than the release build costs.
    test(&TestArgs {
        build: BuildArgs {
            release: true,
            zprof: None,
            combination: None,
        },
        runtime: 8,
        variant: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(trouble: &[&str]) -> RunFailure {
        RunFailure {
            message: "the guest test script failed with exit status 1".into(),
            trouble: trouble.iter().map(|t| t.to_string()).collect(),
            console: std::env::temp_dir().join("zprof-no-such-console.log"),
        }
    }

    /// Runs the retry over `results` (one per attempt) and returns its
    /// result, the attempts made and the ledger's outcomes.
    fn retry(
        results: Vec<Result<Vec<String>, RunFailure>>,
    ) -> (Result<Vec<String>, String>, u32, Vec<String>) {
        let mut results = results.into_iter();
        let mut attempts = 0;
        let mut outcomes = Vec::new();
        let result = run_retrying_kernel_trouble(
            "c",
            |n| {
                attempts = n;
                results.next().expect("no more attempts were planned")
            },
            |outcome, _| outcomes.push(outcome.to_owned()),
        );
        (result, attempts, outcomes)
    }

    #[test]
    fn a_failure_without_kernel_trouble_is_not_retried() {
        let (result, attempts, outcomes) = retry(vec![Err(failed(&[]))]);
        assert!(result.is_err());
        assert_eq!((attempts, outcomes.len()), (1, 0));
    }

    #[test]
    fn a_failure_with_an_oops_is_run_again_up_to_four_times_each_attempt_in_the_ledger() {
        let oops = "RIP: 0010:0x0";
        let (result, attempts, outcomes) = retry(vec![Err(failed(&[oops])), Ok(vec!["ok".into()])]);
        let lines = result.unwrap();
        assert!(lines.last().unwrap().contains(oops), "{lines:?}");
        assert_eq!(
            (attempts, outcomes),
            (2, vec!["miss".to_owned(), "pass".to_owned()])
        );
        let all = KERNEL_TROUBLE_ATTEMPTS;
        let (result, attempts, outcomes) = retry((0..all).map(|_| Err(failed(&[oops]))).collect());
        assert!(result.unwrap_err().contains(oops));
        assert_eq!(
            (attempts, outcomes),
            (all, vec!["miss".to_owned(); all as usize])
        );
        // Trouble, then a failure of its own: that failure is the verdict.
        let (result, attempts, outcomes) = retry(vec![Err(failed(&[oops])), Err(failed(&[]))]);
        let message = result.unwrap_err();
        assert!(message.contains(oops), "{message}");
        assert_eq!((attempts, outcomes.len()), (2, 2));
    }
}

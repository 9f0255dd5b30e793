//! `guest run`: boot the guest, run one command in it, bring its results back.
//!
//! The initramfs is three newc archives concatenated: the cached base, the
//! modules of the chosen variant, and a payload made here at each run (zprof,
//! the `guest/` scripts, the command line). The guest's `/init` (guest/init) runs
//! the command, then sends `/results` as a gzipped tar over the second serial
//! port (a file on the host) and prints one line on the console,
//! `ZPROF-GUEST-DONE status=N bytes=M`. No line, a short transfer or the timeout
//! is a failure, never a pass.
//!
//! A run that died before the command started (no "guest: up" line from /init,
//! or no "guest: zfs ... loaded" line) fails with a [`BootFailure`]: emulation
//! can crash a boot that zprof never touched, and the caller may retry such a
//! run once, where a failure of the command itself is never retried. Every
//! console (and the guest's dmesg) is scanned for kernel trouble (oopses,
//! BUGs, warnings), which is reported whatever the outcome. A guest whose
//! kernel oopsed is stopped [`OOPS_GRACE`] later rather than at its timeout:
//! an oops in one of ZFS's taskq threads hangs the pool, and the run has
//! failed anyway.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail, ensure};
use std::fmt;

use super::{Artifacts, Variant, build::install_binary, cpio, fresh_dir};

/// What a run produced.
pub struct Outcome {
    /// The guest command's exit status.
    pub status: i32,
    /// Boot to power-off.
    pub elapsed: Duration,
    /// The serial console, as the guest printed it.
    pub console: PathBuf,
    /// `/results` of the guest, unpacked.
    pub results: PathBuf,
    /// Boot to the moment the DONE line reached the host.
    pub done_after: Duration,
    /// Kernel trouble lines in the console and the guest's dmesg.
    pub trouble: Vec<String>,
}

/// The marker `/init` prints last.
const DONE: &str = "ZPROF-GUEST-DONE";
/// /init's line once the kernel has booted and run it (guest/init).
const UP: &str = "guest: up after";
/// /init's line once the zfs modules are in; the command runs next.
const LOADED: (&str, &str) = ("guest: zfs ", " loaded after");

/// Lines the kernel prints when something went wrong in it (an oops, a BUG, a
/// warning's backtrace), whoever caused it.
const TROUBLE: &[&str] = &[
    "Oops",
    "BUG:",
    "general protection fault",
    "Kernel panic",
    "RIP:",
    "WARNING: CPU",
];

/// Lines after which the kernel is not trusted to finish the run (a
/// warning's backtrace is not one: the kernel goes on).
const FATAL: &[&str] = &["Oops", "BUG:", "general protection fault", "Kernel panic"];

/// How long a guest may go on after a fatal line before it is stopped: time
/// for the kernel to print the whole trace. (A 6.12 guest whose z_wr_iss
/// thread oopsed calling address 0 hung until its 900 s timeout; CI.)
pub const OOPS_GRACE: Duration = Duration::from_secs(20);

/// A run that died before its command started: the kernel did not reach
/// /init, or /init could not load the zfs modules. Nothing of the command
/// ran, so nothing of what it tests is judged by it.
#[derive(Debug)]
pub struct BootFailure {
    /// What the console showed (or lacked).
    pub reason: String,
    /// Kernel trouble lines in the console.
    pub trouble: Vec<String>,
    /// The console log.
    pub console: PathBuf,
    /// Its last lines.
    pub tail: String,
}

impl fmt::Display for BootFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the guest did not boot to its command: {}", self.reason)?;
        if !self.trouble.is_empty() {
            write!(f, "; kernel trouble: {}", self.trouble.join(" | "))?;
        }
        write!(
            f,
            "; console log {}:\n{}",
            self.console.display(),
            self.tail
        )
    }
}

impl std::error::Error for BootFailure {}

/// How far /init got, from the console.
#[derive(Debug, PartialEq, Eq)]
enum Reached {
    /// No "guest: up" line: the kernel died or hung before /init.
    Nothing,
    /// /init ran but the zfs modules did not load.
    Up,
    /// The command was started.
    Command,
}

fn reached(console: &str) -> Reached {
    if !console.contains(UP) {
        Reached::Nothing
    } else if !console
        .lines()
        .any(|l| l.contains(LOADED.0) && l.contains(LOADED.1))
    {
        Reached::Up
    } else {
        Reached::Command
    }
}

/// Whether the console shows /init started the command.
pub fn started_command(console: &str) -> bool {
    reached(console) == Reached::Command
}

/// The kernel trouble lines of `text`, trimmed.
pub fn trouble_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| TROUBLE.iter().any(|t| l.contains(t)))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Where the first fatal line of `text` came and how the kernel got there:
/// the test script's last step before it (its `== ` line) and the first call
/// trace's frames, innermost first, without the unreliable `? ` ones. Under
/// emulation an oops is rare and its console stays on the machine that ran
/// it, so a CI failure must carry enough to tell one cause from another.
pub fn oops_context(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let fatal = lines
        .iter()
        .position(|l| FATAL.iter().any(|f| l.contains(f)))?;
    let step = lines[..fatal]
        .iter()
        .rev()
        .find_map(|l| l.trim().strip_prefix("== "))
        .unwrap_or("before the script's first step");
    let frames: Vec<&str> = lines[fatal..]
        .iter()
        .skip_while(|l| !l.contains("Call Trace:"))
        .skip(1)
        .map(|l| without_timestamp(l).trim())
        .take_while(|l| !l.starts_with("</TASK>") && !l.starts_with("RIP:"))
        .filter(|l| !l.starts_with('?') && !l.starts_with('<'))
        .filter_map(|l| l.split_whitespace().next())
        .map(|frame| frame.split('/').next().unwrap_or(frame))
        .take(MAX_FRAMES)
        .collect();
    let trace = if frames.is_empty() {
        "no call trace".to_owned()
    } else {
        format!("call trace {}", frames.join(" < "))
    };
    Some(format!("during '{step}', {trace}"))
}

/// Frames of an oops's call trace kept in a failure's message.
const MAX_FRAMES: usize = 14;

/// A kernel line without its `[ seconds]` prefix.
fn without_timestamp(line: &str) -> &str {
    match line.trim_start().strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(line, |(_, after)| after),
        None => line,
    }
}

/// A [`BootFailure`] if the console shows the command never started.
fn boot_failure(console: &Path, text: &str, what: &str) -> Option<anyhow::Error> {
    let reason = match reached(text) {
        Reached::Nothing => format!(
            "{what}, and the console has no '{UP}' line (the kernel died or hung before /init)"
        ),
        Reached::Up => format!(
            "{what}, and /init did not load the zfs modules (no 'guest: zfs ... loaded' line)"
        ),
        Reached::Command => return None,
    };
    let failure = BootFailure {
        reason,
        trouble: trouble_lines(text),
        console: console.to_owned(),
        tail: tail(console, 30),
    };
    Some(anyhow::Error::new(failure))
}

/// How much of the guest's console to copy to stderr as it comes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// Every line.
    All,
    /// /init's own lines and the test script's step lines (`== ...`); the rest is
    /// in the console log.
    Steps,
    /// Only kernel trouble lines (`guest boots`: one line per boot of its own).
    Quiet,
}

/// Boots with `variant`'s modules and runs `command` (words for the guest's shell).
pub fn run(
    artifacts: &Artifacts,
    variant: Variant,
    command: &[String],
    out: &Path,
    timeout: Duration,
    echo: Echo,
) -> anyhow::Result<Outcome> {
    fresh_dir(out)?;
    let payload = out.join("payload.cpio");
    make_payload(artifacts, variant, command, out, &payload)?;
    let initrd = out.join("initrd.cpio");
    write_initrd(artifacts, variant, &payload, &initrd)?;
    let console = out.join("console.log");
    let transfer = out.join("results.tar.gz");
    let results = out.join("results");

    let mut cmd = qemu_command(artifacts, &transfer, &initrd);
    if echo != Echo::Quiet {
        eprintln!(
            "xtask: guest: booting {} with the {} modules ({variant} variant): {}",
            artifacts.kver,
            variant.modules(),
            command.join(" ")
        );
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", artifacts.qemu.binary.display()))?;
    let stdout = child.stdout.take().unwrap();
    let fatal_at = Arc::new(OnceLock::new());
    let reader = read_console(stdout, console.clone(), started, echo, fatal_at.clone());
    let status = match wait_or_kill(&mut child, started, timeout, &fatal_at)? {
        Ended::Exited(status) => status,
        Ended::TimedOut => {
            let _ = reader.join();
            return Err(timed_out(&console, timeout));
        }
        Ended::StoppedAfterOops(after) => {
            let _ = reader.join();
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            let what = format!("stopped {} s after an oops", OOPS_GRACE.as_secs());
            if let Some(err) = boot_failure(&console, &text, &what) {
                return Err(err);
            }
            bail!(
                "the guest's kernel oopsed {} s into the run and the guest was stopped {} s later (kernel trouble: {}); console log {}:\n{}",
                after.as_secs(),
                OOPS_GRACE.as_secs(),
                trouble_lines(&text).join(" | "),
                console.display(),
                tail(&console, 30)
            );
        }
    };
    let elapsed = started.elapsed();
    let done_at = reader.join().ok().and_then(Result::ok).flatten();
    let _ = std::fs::remove_file(&initrd);
    let text = std::fs::read_to_string(&console)?;
    let trouble = trouble_lines(&text);
    let trouble_note = if trouble.is_empty() {
        String::new()
    } else {
        format!(" (kernel trouble: {})", trouble.join(" | "))
    };
    if !status.success() {
        if let Some(err) = boot_failure(&console, &text, &format!("qemu failed with {status}")) {
            return Err(err);
        }
        bail!(
            "qemu failed with {status}{trouble_note}; console log {}:\n{}",
            console.display(),
            tail(&console, 20)
        );
    }
    let done = parse_done(&text);
    let what = if done.is_some() {
        "the guest reported its status"
    } else {
        "the guest stopped without reporting its exit status"
    };
    if let Some(err) = boot_failure(&console, &text, what) {
        return Err(err);
    }
    let Some((guest_status, bytes)) = done else {
        bail!(
            "the guest stopped without reporting its exit status (a kernel panic or a crash of /init?){trouble_note}; console log {}:\n{}",
            console.display(),
            tail(&console, 30)
        );
    };
    unpack_results(&transfer, bytes, &results)?;
    // quiet keeps warnings (level 4) off the console: the guest's dmesg has them.
    let mut trouble = trouble;
    add_dmesg_trouble(&mut trouble, &results);
    let done_after = done_at.unwrap_or(elapsed);
    Ok(Outcome {
        status: guest_status,
        elapsed,
        console,
        results,
        done_after,
        trouble,
    })
}

/// The initramfs of a boot: the base, the variant's modules and the payload,
/// concatenated (the kernel reads them as one archive).
fn write_initrd(
    artifacts: &Artifacts,
    variant: Variant,
    payload: &Path,
    initrd: &Path,
) -> anyhow::Result<()> {
    let mut file = std::fs::File::create(initrd)?;
    for part in [
        artifacts.base_cpio.as_path(),
        artifacts.modules(variant),
        payload,
    ] {
        std::io::copy(
            &mut std::fs::File::open(part)
                .with_context(|| format!("reading {}", part.display()))?,
            &mut file,
        )?;
    }
    Ok(())
}

/// The qemu command line: the guest's console on stdout, the results back
/// through a second serial port into `transfer`.
fn qemu_command(artifacts: &Artifacts, transfer: &Path, initrd: &Path) -> Command {
    let mut cmd = Command::new(&artifacts.qemu.binary);
    if let Some(lib) = &artifacts.qemu.lib_dir {
        cmd.env("LD_LIBRARY_PATH", lib);
    }
    for dir in &artifacts.qemu.firmware {
        cmd.arg("-L").arg(dir);
    }
    // Software emulation: the build machines have no KVM. A host thread per
    // vCPU (qemu's default): with a thread per vCPU, code the kernel patched on
    // one vCPU (static_key_enable's jump labels) was once run half-patched by
    // the other, and a boot on an Intel Xeon oopsed 1.7 s in
    // (hrtimer_start_range_ns+0x1cb) before /init ran; such a boot is retried
    // (see BootFailure). One thread for both (tcg,thread=single) was tried
    // and removes that race, but a wake-up of the other vCPU then waits for
    // its time slice: every fsync'd zvol write took fio 31.5 ms or more
    // (minimum 31.5, median 31.6) where ZFS's part was 2 ms, and the requests
    // check failed on it. -nic none: no network (and no iPXE option ROM needed).
    cmd.args([
        "-accel", "tcg", "-m", "4G", "-smp", "2", "-display", "none", "-monitor", "none", "-vga",
        "none",
    ])
    .args(["-nic", "none", "-no-reboot", "-serial", "stdio"])
    .arg("-serial")
    .arg(format!("file:{}", transfer.display()))
    .arg("-kernel")
    .arg(&artifacts.vmlinuz)
    .arg("-initrd")
    .arg(initrd)
    // panic=-1 reboots at once on a panic, and -no-reboot turns that into an exit.
    .args(["-append", "console=ttyS0 rdinit=/init panic=-1 quiet"])
    .stdin(Stdio::null())
    .stdout(Stdio::piped());
    cmd
}

/// Copies the guest's console to `log_path` (and to stderr as `echo` says)
/// on a thread, which returns when the DONE line arrived (boot timings for
/// `guest boots`).
fn read_console(
    stdout: std::process::ChildStdout,
    log_path: PathBuf,
    started: Instant,
    echo: Echo,
    fatal_at: Arc<OnceLock<Instant>>,
) -> std::thread::JoinHandle<std::io::Result<Option<Duration>>> {
    std::thread::spawn(move || -> std::io::Result<Option<Duration>> {
        let mut log = std::fs::File::create(&log_path)?;
        let mut done_at = None;
        for line in BufReader::new(stdout).split(b'\n') {
            let line = line?;
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches('\r');
            writeln!(log, "{text}")?;
            if text.contains(DONE) {
                done_at.get_or_insert(started.elapsed());
            }
            if FATAL.iter().any(|f| text.contains(f)) {
                let _ = fatal_at.set(Instant::now());
            }
            let step = text.starts_with("guest: ")
                || text.starts_with("== ")
                || text.contains(DONE)
                || text.contains("FAILED");
            let shown = match echo {
                Echo::All => true,
                Echo::Steps => step,
                Echo::Quiet => false,
            };
            if shown || TROUBLE.iter().any(|t| text.contains(t)) {
                eprintln!("guest| {text}");
            }
        }
        Ok(done_at)
    })
}

/// How a guest's qemu ended.
enum Ended {
    Exited(std::process::ExitStatus),
    /// Killed at the timeout.
    TimedOut,
    /// Killed [`OOPS_GRACE`] after a fatal kernel line, which came this long
    /// after the start.
    StoppedAfterOops(Duration),
}

/// Waits for qemu to exit; kills it at `timeout` after `started`, or
/// [`OOPS_GRACE`] after the console showed a fatal line (`fatal_at`).
fn wait_or_kill(
    child: &mut std::process::Child,
    started: Instant,
    timeout: Duration,
    fatal_at: &OnceLock<Instant>,
) -> std::io::Result<Ended> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ended::Exited(status));
        }
        let stop = if started.elapsed() > timeout {
            Some(Ended::TimedOut)
        } else {
            fatal_at
                .get()
                .filter(|at| at.elapsed() > OOPS_GRACE)
                .map(|at| Ended::StoppedAfterOops(at.duration_since(started)))
        };
        if let Some(ended) = stop {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(ended);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The error of a guest killed at its timeout: a boot failure if the
/// console shows one (so that it is retried), else the console's tail.
fn timed_out(console: &Path, timeout: Duration) -> anyhow::Error {
    let text = std::fs::read_to_string(console).unwrap_or_default();
    if let Some(err) = boot_failure(
        console,
        &text,
        &format!("killed after {} s", timeout.as_secs()),
    ) {
        return err;
    }
    anyhow!(
        "the guest did not finish within {} s and was killed; console log {}:\n{}",
        timeout.as_secs(),
        console.display(),
        tail(console, 20)
    )
}

/// Adds the kernel trouble lines of the guest's dmesg (in `results`) that
/// the console did not show.
pub fn add_dmesg_trouble(trouble: &mut Vec<String>, results: &Path) {
    let dmesg = std::fs::read_to_string(results.join("dmesg.txt")).unwrap_or_default();
    for line in trouble_lines(&dmesg) {
        if !trouble.contains(&line) {
            trouble.push(line);
        }
    }
}

/// Checks that all `bytes` of the results arrived in `transfer` and unpacks
/// them into `results`.
fn unpack_results(transfer: &Path, bytes: u64, results: &Path) -> anyhow::Result<()> {
    let got = std::fs::metadata(transfer).map(|m| m.len()).unwrap_or(0);
    ensure!(
        got == bytes,
        "the guest sent {bytes} bytes of results but {got} arrived ({})",
        transfer.display()
    );
    std::fs::create_dir_all(results)?;
    crate::run(
        Command::new("tar")
            .arg("-xzf")
            .arg(transfer)
            .arg("-C")
            .arg(results),
    )
    .context("unpacking the guest's results")
}

/// Finds `ZPROF-GUEST-DONE status=N bytes=M` (printed through the kernel log,
/// so it may carry a timestamp prefix).
fn parse_done(console: &str) -> Option<(i32, u64)> {
    let line = console
        .lines()
        .rev()
        .find_map(|l| l.split_once(DONE).map(|(_, rest)| rest))?;
    let mut status = None;
    let mut bytes = None;
    for word in line.split_whitespace() {
        if let Some(v) = word.strip_prefix("status=") {
            status = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("bytes=") {
            bytes = v.parse().ok();
        }
    }
    Some((status?, bytes?))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Quotes a word for the guest's shell.
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The payload: /init, /payload/zprof (with its libraries), /payload/guest/*
/// (the repo's guest/ directory) and /payload/cmd, the command line; for the
/// headers variant, the offsets table in zprof's cache (/var/cache/zprof).
fn make_payload(
    artifacts: &Artifacts,
    variant: Variant,
    command: &[String],
    out: &Path,
    archive: &Path,
) -> anyhow::Result<()> {
    let root = out.join("payload-root");
    fresh_dir(&root)?;
    let guest_src = crate::workspace_root().join("guest");
    let scripts = root.join("payload/guest");
    std::fs::create_dir_all(&scripts)?;
    for entry in
        std::fs::read_dir(&guest_src).with_context(|| format!("reading {}", guest_src.display()))?
    {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), scripts.join(entry.file_name()))?;
        }
    }
    std::fs::copy(guest_src.join("init"), root.join("init")).context("guest/init is missing")?;
    // In a cell with a root's user space, zprof's libraries come from the
    // root too (this host's libc would replace the guest's), so zprof is
    // copied where the root sees it.
    let zprof = zprof_for_tools(artifacts)?;
    install_binary(
        &root,
        &zprof,
        "/payload/zprof",
        (&[], Path::new("/nonexistent")),
        &artifacts.toolchain,
    )?;
    loop_module(artifacts, &root.join("payload/loop.ko"))?;
    if variant == Variant::Headers {
        offsets_table(artifacts, &zprof, &root.join("var/cache/zprof"))?;
    }
    let line: Vec<String> = command.iter().map(|w| shell_quote(w)).collect();
    std::fs::write(root.join("payload/cmd"), line.join(" ") + "\n")?;
    cpio::write_tree(&root, archive)?;
    std::fs::remove_dir_all(&root).map_err(|e| anyhow!("removing {}: {e}", root.display()))?;
    Ok(())
}

/// The kernel's loop.ko, uncompressed (busybox's insmod reads no .xz), so the
/// guest can put pools on block devices and exercise zfs.ko's vdev_disk path.
fn loop_module(artifacts: &Artifacts, into: &Path) -> anyhow::Result<()> {
    // Under /lib in Debian 12's kernel packages, /usr/lib in trixie's (merged /usr).
    let dir = ["kernel/lib/modules", "kernel/usr/lib/modules"]
        .iter()
        .map(|modules| {
            artifacts
                .cache
                .join(modules)
                .join(&artifacts.kver)
                .join("kernel/drivers/block")
        })
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| artifacts.cache.join("kernel/lib/modules"));
    let plain = dir.join("loop.ko");
    if plain.exists() {
        std::fs::copy(&plain, into).with_context(|| format!("copying {}", plain.display()))?;
        return Ok(());
    }
    let packed = dir.join("loop.ko.xz");
    ensure!(
        packed.exists(),
        "the kernel package has no loop module in {}",
        dir.display()
    );
    let output = Command::new("xz")
        .arg("-dc")
        .arg(&packed)
        .output()
        .context("running xz")?;
    ensure!(
        output.status.success(),
        "xz -dc {} failed: {}",
        packed.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(into, output.stdout)?;
    Ok(())
}

/// The zprof binary at a path the cell's tools see: as built, or copied into
/// the guest cache for a root.
fn zprof_for_tools(artifacts: &Artifacts) -> anyhow::Result<std::path::PathBuf> {
    if !artifacts.toolchain.is_root() {
        return Ok(artifacts.zprof.clone());
    }
    let copy = artifacts.cache.join("zprof-for-root");
    std::fs::copy(&artifacts.zprof, &copy)
        .with_context(|| format!("copying {} into the guest cache", artifacts.zprof.display()))?;
    Ok(copy)
}

/// `zprof offsets` for the module build without BTF, from the tree that built
/// it, into the cache directory `cache` (1 s: made at each boot, not cached).
/// It compiles with the cell's tools, as it would on a host of that release.
fn offsets_table(artifacts: &Artifacts, zprof: &Path, cache: &Path) -> anyhow::Result<()> {
    // Written under the guest cache first, where a root's zprof can write.
    let made = artifacts.cache.join("offsets-made");
    fresh_dir(&made)?;
    let status = artifacts
        .toolchain
        .command(&zprof.display().to_string())
        .arg("offsets")
        .arg("--module")
        .arg(artifacts.cache.join("modules-nobtf/zfs.ko"))
        .arg("--zfs-build")
        .arg(artifacts.cache.join("zfs-build"))
        .env("ZPROF_CACHE_DIR", &made)
        .status()
        .context("running zprof offsets")?;
    anyhow::ensure!(status.success(), "zprof offsets failed with {status}");
    super::build::copy_tree(&made, cache)?;
    std::fs::remove_dir_all(&made)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_is_stopped_after_an_oops_not_at_its_timeout() {
        let hung = || Command::new("sleep").arg("600").spawn().unwrap();
        let started = Instant::now();
        let oopsed = OnceLock::new();
        oopsed
            .set(Instant::now().checked_sub(OOPS_GRACE * 2).unwrap())
            .unwrap();
        let ended = wait_or_kill(&mut hung(), started, Duration::from_secs(900), &oopsed);
        assert!(matches!(ended.unwrap(), Ended::StoppedAfterOops(_)));
        // Without a fatal line only the timeout stops it; a guest that exits is let be.
        let none = OnceLock::new();
        let ended = wait_or_kill(&mut hung(), Instant::now(), Duration::ZERO, &none);
        assert!(matches!(ended.unwrap(), Ended::TimedOut));
        let mut done = Command::new("true").spawn().unwrap();
        let ended = wait_or_kill(&mut done, Instant::now(), Duration::from_secs(900), &none);
        assert!(matches!(ended.unwrap(), Ended::Exited(s) if s.success()));
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn done_line_is_found_after_a_timestamp() {
        let console =
            "boot\n[   12.5] ZPROF-GUEST-DONE status=3 bytes=1234\n[   12.6] reboot: Power down\n";
        assert_eq!(parse_done(console), Some((3, 1234)));
        assert_eq!(parse_done("boot\nKernel panic\n"), None);
        assert_eq!(parse_done("ZPROF-GUEST-DONE status=x bytes=1\n"), None);
    }

    #[test]
    fn a_console_without_inits_lines_is_a_boot_failure() {
        let oops = "[    1.73] RIP: 0010:hrtimer_start_range_ns+0x1cb/0x400\n[    1.74] Kernel panic - not syncing: Fatal exception\n";
        assert_eq!(reached(oops), Reached::Nothing);
        let up = "guest: up after 2.1 s, kernel 6.12\nguest: insmod spl failed\n";
        assert_eq!(reached(up), Reached::Up);
        let started = "guest: up after 2.1 s, kernel 6.12\nguest: zfs 2.3.2-1 loaded after 5.0 s; module BTF: yes\n";
        assert_eq!(reached(started), Reached::Command);
        let console = Path::new("/nonexistent/console.log");
        let err = boot_failure(console, oops, "qemu exited").unwrap();
        let failure = err.downcast_ref::<BootFailure>().expect("a BootFailure");
        assert_eq!(failure.trouble.len(), 2, "{:?}", failure.trouble);
        assert!(
            boot_failure(console, started, "no DONE line").is_none(),
            "the command ran: not a boot failure"
        );
    }

    #[test]
    fn kernel_trouble_is_found_but_not_in_ordinary_lines() {
        let text = "guest: up after 2 s\n[ 3.1] WARNING: CPU: 1 PID: 7 at kernel/x.c:1\n[ 3.2] BUG: kernel NULL pointer dereference\nfio: done\n";
        assert_eq!(trouble_lines(text).len(), 2);
        assert!(trouble_lines("guest: zfs 2.1.11 loaded\nrecorded 5 BUGS fixed\n").is_empty());
    }

    /// The shape of the 6.1 guest's oops at serve's detach (CI of 16b56e3),
    /// its frames shortened.
    #[test]
    fn an_oops_is_placed_in_its_step_with_its_frames() {
        let text = "== rz1-off: raidz1, nolog (3.10 s)\n\
            [  240.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
            [  240.1] RIP: 0010:0x0\n\
            [  240.1] Call Trace:\n\
            [  240.1]  <TASK>\n\
            [  240.1]  ? __die+0x20/0x70\n\
            [  240.1]  zio_done+0x17c/0x1140 [zfs]\n\
            [  240.1]  zio_execute+0x86/0x130 [zfs]\n\
            [  240.1]  taskq_thread+0x28a/0x4b0 [spl]\n\
            [  240.1]  </TASK>\n\
            [  240.1]  kthread+0xd2/0x100\n";
        assert_eq!(
            oops_context(text).unwrap(),
            "during 'rz1-off: raidz1, nolog (3.10 s)', call trace zio_done+0x17c < zio_execute+0x86 < taskq_thread+0x28a"
        );
        assert_eq!(
            oops_context("[ 1.0] Kernel panic - not syncing: x\n").unwrap(),
            "during 'before the script's first step', no call trace"
        );
        assert!(oops_context("== a (1 s)\nfio: done\n").is_none());
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("--runtime=8"), "--runtime=8");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}

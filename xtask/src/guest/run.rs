//! `guest run`: boot the guest, run one command in it, bring its results back.
//!
//! The initramfs is three newc archives concatenated: the cached base, the
//! modules of the chosen variant, and a payload made here at each run (zprof,
//! the `guest/` scripts, the command line). The guest's `/init` (guest/init) runs
//! the command, then sends `/results` as a gzipped tar over the second serial
//! port (a file on the host) and prints one line on the console,
//! `ZPROF-GUEST-DONE status=N bytes=M`. No line, a short transfer or the timeout
//! is a failure, never a pass.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail, ensure};

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
}

/// The marker `/init` prints last.
const DONE: &str = "ZPROF-GUEST-DONE";

/// How much of the guest's console to copy to stderr as it comes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// Every line.
    All,
    /// /init's own lines and the test script's step lines (`== ...`); the rest is
    /// in the console log.
    Steps,
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
    {
        let mut file = std::fs::File::create(&initrd)?;
        for part in [artifacts.base_cpio.as_path(), artifacts.modules(variant), payload.as_path()] {
            std::io::copy(&mut std::fs::File::open(part).with_context(|| format!("reading {}", part.display()))?, &mut file)?;
        }
    }
    let console = out.join("console.log");
    let transfer = out.join("results.tar.gz");
    let results = out.join("results");

    let mut cmd = Command::new(&artifacts.qemu.binary);
    if let Some(lib) = &artifacts.qemu.lib_dir {
        cmd.env("LD_LIBRARY_PATH", lib);
    }
    for dir in &artifacts.qemu.firmware {
        cmd.arg("-L").arg(dir);
    }
    // Software emulation: the build machines have no KVM. -nic none: no network
    // (and no iPXE option ROM needed).
    cmd.args(["-accel", "tcg", "-m", "4G", "-smp", "2", "-display", "none", "-monitor", "none", "-vga", "none"])
        .args(["-nic", "none", "-no-reboot", "-serial", "stdio"])
        .arg("-serial")
        .arg(format!("file:{}", transfer.display()))
        .arg("-kernel")
        .arg(&artifacts.vmlinuz)
        .arg("-initrd")
        .arg(&initrd)
        // panic=-1 reboots at once on a panic, and -no-reboot turns that into an exit.
        .args(["-append", "console=ttyS0 rdinit=/init panic=-1 quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    eprintln!(
        "xtask: guest: booting {} with the {} modules ({variant} variant): {}",
        artifacts.kver,
        variant.modules(),
        command.join(" ")
    );
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {}", artifacts.qemu.binary.display()))?;
    let stdout = child.stdout.take().unwrap();
    let log_path = console.clone();
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let mut log = std::fs::File::create(&log_path)?;
        for line in BufReader::new(stdout).split(b'\n') {
            let line = line?;
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches('\r');
            writeln!(log, "{text}")?;
            let step = text.starts_with("guest: ") || text.starts_with("== ") || text.contains(DONE) || text.contains("FAILED");
            if echo == Echo::All || step {
                eprintln!("guest| {text}");
            }
        }
        Ok(())
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            bail!(
                "the guest did not finish within {} s and was killed; console log {}:\n{}",
                timeout.as_secs(),
                console.display(),
                tail(&console, 20)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let elapsed = started.elapsed();
    let _ = reader.join();
    let _ = std::fs::remove_file(&initrd);
    ensure!(status.success(), "qemu failed with {status}; console log {}:\n{}", console.display(), tail(&console, 20));

    let text = std::fs::read_to_string(&console)?;
    let Some((guest_status, bytes)) = parse_done(&text) else {
        bail!(
            "the guest stopped without reporting its exit status (a kernel panic or a crash of /init?); console log {}:\n{}",
            console.display(),
            tail(&console, 30)
        );
    };
    let got = std::fs::metadata(&transfer).map(|m| m.len()).unwrap_or(0);
    ensure!(got == bytes, "the guest sent {bytes} bytes of results but {got} arrived ({})", transfer.display());
    std::fs::create_dir_all(&results)?;
    crate::run(Command::new("tar").arg("-xzf").arg(&transfer).arg("-C").arg(&results))
        .context("unpacking the guest's results")?;
    Ok(Outcome { status: guest_status, elapsed, console, results })
}

/// Finds `ZPROF-GUEST-DONE status=N bytes=M` (printed through the kernel log,
/// so it may carry a timestamp prefix).
fn parse_done(console: &str) -> Option<(i32, u64)> {
    let line = console.lines().rev().find_map(|l| l.split_once(DONE).map(|(_, rest)| rest))?;
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
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The payload: /init, /payload/zprof (with its libraries), /payload/guest/*
/// (the repo's guest/ directory) and /payload/cmd, the command line; for the
/// headers variant, the offsets table in zprof's cache (/var/cache/zprof).
fn make_payload(artifacts: &Artifacts, variant: Variant, command: &[String], out: &Path, archive: &Path) -> anyhow::Result<()> {
    let root = out.join("payload-root");
    fresh_dir(&root)?;
    let guest_src = crate::workspace_root().join("guest");
    let scripts = root.join("payload/guest");
    std::fs::create_dir_all(&scripts)?;
    for entry in std::fs::read_dir(&guest_src).with_context(|| format!("reading {}", guest_src.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), scripts.join(entry.file_name()))?;
        }
    }
    std::fs::copy(guest_src.join("init"), root.join("init")).context("guest/init is missing")?;
    install_binary(&root, &artifacts.zprof, "/payload/zprof", &[], Path::new("/nonexistent"))?;
    loop_module(artifacts, &root.join("payload/loop.ko"))?;
    if variant == Variant::Headers {
        offsets_table(artifacts, &root.join("var/cache/zprof"))?;
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
    let dir = artifacts.cache.join(format!("kernel/lib/modules/{}/kernel/drivers/block", artifacts.kver));
    let plain = dir.join("loop.ko");
    if plain.exists() {
        std::fs::copy(&plain, into).with_context(|| format!("copying {}", plain.display()))?;
        return Ok(());
    }
    let packed = dir.join("loop.ko.xz");
    ensure!(packed.exists(), "the kernel package has no loop module in {}", dir.display());
    let output = Command::new("xz").arg("-dc").arg(&packed).output().context("running xz")?;
    ensure!(output.status.success(), "xz -dc {} failed: {}", packed.display(), String::from_utf8_lossy(&output.stderr));
    std::fs::write(into, output.stdout)?;
    Ok(())
}

/// `zprof offsets` for the module build without BTF, from the tree that built
/// it, into the cache directory `cache` (1 s: made at each boot, not cached).
fn offsets_table(artifacts: &Artifacts, cache: &Path) -> anyhow::Result<()> {
    let status = Command::new(&artifacts.zprof)
        .arg("offsets")
        .arg("--module")
        .arg(artifacts.cache.join("modules-nobtf/zfs.ko"))
        .arg("--zfs-build")
        .arg(artifacts.cache.join("zfs-build"))
        .env("ZPROF_CACHE_DIR", cache)
        .status()
        .context("running zprof offsets")?;
    anyhow::ensure!(status.success(), "zprof offsets failed with {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_line_is_found_after_a_timestamp() {
        let console = "boot\n[   12.5] ZPROF-GUEST-DONE status=3 bytes=1234\n[   12.6] reboot: Power down\n";
        assert_eq!(parse_done(console), Some((3, 1234)));
        assert_eq!(parse_done("boot\nKernel panic\n"), None);
        assert_eq!(parse_done("ZPROF-GUEST-DONE status=x bytes=1\n"), None);
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("--runtime=8"), "--runtime=8");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}

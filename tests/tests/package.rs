//! zprof as the hosts of a fleet install it:
//! - `zprof generate` makes a man page per command, each naming every long
//!   option of its command as clap defines it, rendered by man without a
//!   warning, and completion scripts bash, zsh and fish accept (zsh and fish
//!   where installed), bash's completing the subcommands;
//! - `cargo xtask deb` builds a package that dpkg installs: `zprof
//!   --version` and `man zprof-record` work, the service unit passes
//!   `systemd-analyze verify`, and purging it leaves none of its files;
//! - `zprof serve` started with exactly the unit's capabilities (setpriv, as
//!   root) attaches and serves, and as systemd runs it (stderr the journal's
//!   stream, a notify socket) says READY=1 when it serves and STOPPING=1 on
//!   SIGTERM, each log line with its priority; without CAP_BPF or
//!   CAP_PERFMON it exits 2 naming the one missing, before anything is
//!   attached.
//!
//! Needs root for the last two.

use std::{
    collections::BTreeSet,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use clap::CommandFactory as _;

mod common;
use common::{lab_releases, require_root, scratch, stderr, zprof};

/// Each subcommand of zprof's definitions with its long options.
fn commands() -> Vec<(String, BTreeSet<String>)> {
    let cli = zprof::cli::args::Cli::command();
    let longs = |c: &clap::Command| -> BTreeSet<String> {
        c.get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    };
    let mut all = vec![("zprof".to_owned(), longs(&cli))];
    all.extend(
        cli.get_subcommands()
            .map(|s| (format!("zprof-{}", s.get_name()), longs(s))),
    );
    all
}

#[test]
fn man_pages_name_every_option_of_their_command_and_render_cleanly() {
    let dir = scratch("package", "man");
    let output = zprof()
        .args(["generate", "man"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    for (name, options) in commands() {
        let page = dir.join(format!("{name}.1"));
        let rendered = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&page)
            .env("MANWIDTH", "100")
            .output()
            .expect("man (man-db) renders the page");
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(rendered.status.success(), "{name}: {}", stderr(&rendered));
        assert!(
            rendered.stderr.is_empty(),
            "{name}: man warned: {}",
            stderr(&rendered)
        );
        // man joins a hyphenated word it broke at the end of a line.
        let joined = text.replace("\u{2010}\n", "").replace("-\n", "");
        let flat: String = joined.split_whitespace().collect::<Vec<_>>().join(" ");
        for option in &options {
            assert!(
                flat.contains(option.as_str()),
                "{name}: no {option} in\n{text}"
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn completions_parse_in_their_shells_and_bash_completes_the_subcommands() {
    for (shell, check) in [("bash", "-n"), ("zsh", "-n"), ("fish", "--no-execute")] {
        let script = zprof()
            .args(["generate", "completions", shell])
            .output()
            .unwrap();
        assert!(script.status.success(), "{shell}: {}", stderr(&script));
        assert!(!script.stdout.is_empty(), "{shell}: an empty script");
        let Some(mut child) = Command::new(shell)
            .arg(check)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()
        else {
            assert_ne!(shell, "bash", "bash must be installed");
            eprintln!("{shell} is not installed here: its completion's syntax is not checked");
            continue;
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&script.stdout)
            .unwrap();
        let parsed = child.wait_with_output().unwrap();
        assert!(parsed.status.success(), "{shell}: {}", stderr(&parsed));
    }
    let script = zprof()
        .args(["generate", "completions", "bash"])
        .output()
        .unwrap();
    let dir = scratch("package", "bash");
    let path = dir.join("zprof.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    let completed = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(zprof re); COMP_CWORD=1; _zprof zprof re zprof; echo \"${{COMPREPLY[@]}}\"",
            path.display()
        ))
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&completed.stdout);
    for expected in ["record", "report"] {
        assert!(
            words.split_whitespace().any(|w| w == expected),
            "`zprof re<TAB>` gave {words:?} ({})",
            stderr(&completed)
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Purges the package however the test ends.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "zprof"]).output();
    }
}

#[test]
fn the_package_installs_its_pages_unit_and_completions_and_purges_clean() {
    require_root();
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "zprof"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&installed.stdout).contains("installed") {
        panic!(
            "a zprof package is installed on this machine: purge it (dpkg --purge zprof) to run this test, which installs and purges its own"
        );
    }
    let dir = scratch("package", "deb");
    let built = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(common::workspace())
        .args(["xtask", "deb", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cargo xtask deb: {}",
        stderr(&built)
    );
    let package = only_deb(&dir);
    let _purge = Purge;
    let dpkg = Command::new("dpkg")
        .arg("-i")
        .arg(&package)
        .output()
        .unwrap();
    assert!(dpkg.status.success(), "dpkg -i: {}", stderr(&dpkg));
    let files = String::from_utf8_lossy(
        &Command::new("dpkg")
            .args(["-L", "zprof"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    eprintln!("the package's files:\n{files}");
    for path in [
        "/usr/bin/zprof",
        "/usr/share/man/man1/zprof-record.1.gz",
        "/lib/systemd/system/zprof-serve.service",
        "/etc/default/zprof",
        "/usr/share/bash-completion/completions/zprof",
        "/usr/share/zsh/vendor-completions/_zprof",
        "/usr/share/fish/vendor_completions.d/zprof.fish",
        "/usr/share/zprof/monitoring/grafana-dashboard.json",
        "/usr/share/zprof/monitoring/zprof-rules.yml",
    ] {
        assert!(
            files.lines().any(|l| l == path),
            "{path} not in the package"
        );
        assert!(Path::new(path).exists(), "{path} not installed");
    }
    let version = Command::new("/usr/bin/zprof")
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with("zprof "),
        "{version:?}"
    );
    let man = Command::new("man")
        .args(["-w", "zprof-record"])
        .output()
        .unwrap();
    assert!(
        man.status.success(),
        "man -w zprof-record: {}",
        stderr(&man)
    );
    let verify = Command::new("systemd-analyze")
        .args(["verify", "/lib/systemd/system/zprof-serve.service"])
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}",
        stderr(&verify)
    );
    drop(_purge);
    for path in [
        "/usr/bin/zprof",
        "/lib/systemd/system/zprof-serve.service",
        "/etc/default/zprof",
    ] {
        assert!(!Path::new(path).exists(), "{path} left after the purge");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn only_deb(dir: &Path) -> PathBuf {
    let debs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    debs.into_iter().next().unwrap()
}

/// The capabilities packaging/zprof-serve.service keeps, as setpriv names them
/// (CAP_BPF -> bpf).
fn unit_capabilities() -> Vec<String> {
    let unit =
        std::fs::read_to_string(common::workspace().join("packaging/zprof-serve.service")).unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit sets CapabilityBoundingSet");
    line.split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase())
        .collect()
}

/// `zprof serve` under `setpriv --bounding-set` with these capabilities.
fn serve_with(capabilities: &[String], listen: &str, libzpool: &Path) -> Command {
    let bounding = std::iter::once("-all".to_owned())
        .chain(capabilities.iter().map(|c| format!("+{c}")))
        .collect::<Vec<_>>()
        .join(",");
    let mut command = Command::new("setpriv");
    command
        .arg(format!("--bounding-set={bounding}"))
        .arg(common::zprof_binary())
        .args(["serve", "--target"])
        .arg(format!("libzpool={}", libzpool.display()))
        .args(["--listen", listen]);
    command
}

/// A pipe for a child's stderr that passes for the journal's stream, as
/// systemd connects it: JOURNAL_STREAM names its device and inode.
fn journal_stream() -> (std::fs::File, Stdio, String) {
    use std::os::fd::FromRawFd as _;
    let mut fds = [0; 2];
    // SAFETY: pipe fills two descriptors we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on the descriptor just made.
    assert_eq!(unsafe { libc::fstat(fds[1], &mut stat) }, 0);
    // SAFETY: each descriptor is owned once, by the File and the Stdio.
    let (read, write) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            Stdio::from(std::os::fd::OwnedFd::from_raw_fd(fds[1])),
        )
    };
    (read, write, format!("{}:{}", stat.st_dev, stat.st_ino))
}

#[test]
fn serve_runs_with_exactly_the_units_capabilities_and_names_a_missing_one() {
    require_root();
    let release = lab_releases().remove(0);
    let capabilities = unit_capabilities();
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    // As systemd starts it: stderr the journal's stream, a notify socket.
    let (mut journal, stderr_end, stream) = journal_stream();
    let dir = scratch("package", "notify");
    let notify = std::os::unix::net::UnixDatagram::bind(dir.join("notify")).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut command = serve_with(&capabilities, &address, &release.libzpool);
    let mut child = command
        .env("JOURNAL_STREAM", &stream)
        .env("NOTIFY_SOCKET", dir.join("notify"))
        .stderr(stderr_end)
        .spawn()
        .expect("setpriv (util-linux) runs zprof with chosen capabilities");
    drop(command);
    let mut buf = [0u8; 64];
    let n = notify.recv(&mut buf).expect("READY=1 within 60 s");
    assert_eq!(&buf[..n], b"READY=1");
    let mut stream = TcpStream::connect(&address).unwrap();
    write!(stream, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("zprof_build_info"), "{reply}");
    // SAFETY: kill on a child we spawned and have not waited for.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = notify.recv(&mut buf).expect("STOPPING=1 after SIGTERM");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let status = child.wait().unwrap();
    let mut said = String::new();
    journal.read_to_string(&mut said).unwrap();
    assert_eq!(status.code(), Some(0), "{said}");
    // One line per event, each with its syslog priority for journald.
    let lines: Vec<&str> = said.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("<6>zprof serve: ") && l.contains("serving http"))
            && lines
                .iter()
                .any(|l| l.starts_with("<6>zprof serve: SIGTERM")),
        "{said}"
    );
    assert!(lines.iter().all(|l| l.starts_with('<')), "{said}");
    std::fs::remove_dir_all(dir).unwrap();
    for needed in ["bpf", "perfmon"] {
        assert!(capabilities.iter().any(|c| c == needed), "{capabilities:?}");
        let fewer: Vec<String> = capabilities
            .iter()
            .filter(|c| *c != needed)
            .cloned()
            .collect();
        let output = serve_with(&fewer, &address, &release.libzpool)
            .output()
            .expect("setpriv (util-linux) runs zprof with chosen capabilities");
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "without {needed}: {err}");
        let name = format!("CAP_{}", needed.to_ascii_uppercase());
        assert!(
            err.contains(&format!("lacks {name}")) && !err.contains("attached"),
            "without {needed}: {err}"
        );
    }
}

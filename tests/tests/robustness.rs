//! The robustness suite (issue 14): bad input to both binaries, as a table, and
//! the signals zprof must survive without leaving anything behind.
//!
//! Every bad input must exit with its status, name the problem on the first
//! line of stderr, print nothing on stdout, and leave nothing behind: no
//! process of the command it would have run, no BPF program, no lab work
//! directory, no scratch directory of zprof's. Needs root (the fixture is a
//! real recording, and the record cases reach the point of attaching).

use std::{
    collections::BTreeSet,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

mod common;
use common::{lab_binary, require_root, stderr, zprof};

/// The two tests count the machine's BPF programs: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Which binary a case runs.
#[derive(Clone, Copy, Debug)]
enum Bin {
    Zprof,
    Lab,
}

/// A bad input: its arguments (with `{fixtures}`, `{marker}` and `{workdir}`
/// substituted), the exit status, and what the first line of stderr must say.
struct Case {
    bin: Bin,
    args: &'static str,
    exit: i32,
    says: &'static str,
}

const fn zp(args: &'static str, says: &'static str) -> Case {
    Case {
        bin: Bin::Zprof,
        args,
        exit: 2,
        says,
    }
}

/// Lab cases run with `--dir {workdir}`, which must stay empty.
const fn lab(args: &'static str, says: &'static str) -> Case {
    Case {
        bin: Bin::Lab,
        args,
        exit: 2,
        says,
    }
}

const CASES: &[Case] = &[
    // zprof record: the target and its build.
    zp("record --target nope -- {marker}", "unknown target 'nope'"),
    zp(
        "record --target libzpool=/nonexistent/libzpool.so -- {marker}",
        "libzpool not found at /nonexistent/libzpool.so",
    ),
    zp(
        "record --target libzpool=/etc/passwd -- {marker}",
        "not an ELF library",
    ),
    zp(
        "record --target kernel -- {marker}",
        "the kernel target cannot run here",
    ),
    zp(
        "record --offsets /nonexistent.json -- {marker}",
        "cannot read offsets table /nonexistent.json",
    ),
    zp(
        "record --offsets {fixtures}/text.json -- {marker}",
        "is malformed",
    ),
    zp(
        "record --offsets {foreign_table} -- {marker}",
        "was made for libzpool build",
    ),
    zp(
        "record --zfs-version 9.9.9 -- {marker}",
        "--zfs-version 9.9.9 contradicts the build",
    ),
    zp(
        "record --zfs-version abc -- {marker}",
        "'abc' is not an OpenZFS version",
    ),
    // zprof record: options out of range.
    zp("record -d abc -- {marker}", "invalid duration 'abc'"),
    zp("record -d 0 -- {marker}", "must be greater than zero"),
    zp(
        "record -d 100000000000000000000 -- {marker}",
        "at most 366 days",
    ),
    zp(
        "record -d 1fortnight -- {marker}",
        "invalid duration '1fortnight'",
    ),
    zp(
        "record --format yaml -- {marker}",
        "invalid value 'yaml' for '--format",
    ),
    zp(
        "record --hist-entries 0 -- {marker}",
        "0 is not in 16..=1000000",
    ),
    zp(
        "record --hist-entries 99999999999 -- {marker}",
        "is not in 16..=1000000",
    ),
    zp(
        "record --sample-freq 1000000 -- {marker}",
        "1000000 is not in 0..=10000",
    ),
    zp(
        "record --stack-storage-size 0 -- {marker}",
        "0 is not in 64..=1000000",
    ),
    zp(
        "record --skip nonsense -- {marker}",
        "unknown stage group 'nonsense'",
    ),
    zp(
        "record --flamegraph-kind nope -- {marker}",
        "invalid value 'nope' for '--flamegraph-kind",
    ),
    zp(
        "record --unknown-flag -- {marker}",
        "unexpected argument '--unknown-flag'",
    ),
    // zprof record: outputs, checked before anything runs.
    zp(
        "record -o /proc/zprof-nope/rec.json -- {marker}",
        "directory /proc/zprof-nope does not exist",
    ),
    zp("record -o {fixtures} -- {marker}", "it is a directory"),
    zp(
        "record --flamegraph /nonexistent/x.svg -- {marker}",
        "directory /nonexistent does not exist",
    ),
    zp(
        "record --flamegraph {fixtures}/x.png -- {marker}",
        "name it .svg",
    ),
    // zprof record: what to trace.
    zp("record --pid 999999999", "process 999999999 does not exist"),
    zp("record --pid abc", "invalid value 'abc' for '--pid"),
    zp("record --pid 1 -- {marker}", "cannot be used with"),
    zp(
        "record -- /nonexistent/bench",
        "cannot run '/nonexistent/bench'",
    ),
    zp("run", "zprof run needs the benchmark to run after --"),
    // Recordings that are not recordings.
    zp(
        "report /nonexistent.json",
        "cannot read recording /nonexistent.json",
    ),
    zp("report /dev/zero", "not a JSON object"),
    zp("report {fixtures}", "Is a directory"),
    zp("report {fixtures}/empty.json", "EOF while parsing"),
    zp("report {fixtures}/text.json", "starts with byte 0x68"),
    zp("report {fixtures}/array.json", "starts with byte 0x5b"),
    zp("report {fixtures}/truncated.json", "corrupt or truncated"),
    zp(
        "report {fixtures}/negative.json",
        "duration -10 s is not a recording's length",
    ),
    zp(
        "report {fixtures}/zero.json",
        "duration 0 s is not a recording's length",
    ),
    zp(
        "report {fixtures}/future.json",
        "recording format version 999, newer than this zprof reads",
    ),
    zp(
        "report {fixtures}/foreign.json",
        "schema is \"something-else\"",
    ),
    zp(
        "report {fixtures}/negative-loss.json",
        "field \"ringbuf_full\"",
    ),
    zp(
        "report {fixtures}/good.json --format xml",
        "invalid value 'xml' for '--format",
    ),
    zp(
        "explain /nonexistent.json",
        "cannot read recording /nonexistent.json",
    ),
    zp(
        "explain {fixtures}/good.json --what-if slog=floppy",
        "invalid --what-if 'slog=floppy'",
    ),
    zp(
        "explain {fixtures}/good.json --what-if slog=-5us",
        "invalid --what-if 'slog=-5us'",
    ),
    zp(
        "compare {fixtures}/good.json /nonexistent.json",
        "cannot read recording /nonexistent.json",
    ),
    zp(
        "compare {fixtures}/good.json",
        "required arguments were not provided",
    ),
    zp(
        "flamegraph {fixtures}/good.json -o /nonexistent/x.svg",
        "directory /nonexistent does not exist",
    ),
    zp(
        "flamegraph {fixtures}/good.json -o {fixtures}/x.png",
        "name it .svg",
    ),
    zp(
        "flamegraph {fixtures}/good.json --kind nope -o {fixtures}/x.svg",
        "invalid value 'nope' for '--kind",
    ),
    // zprof offsets and probes.
    zp(
        "offsets --module /etc/passwd",
        "--module /etc/passwd is not an ELF file",
    ),
    zp(
        "offsets --module /nonexistent.ko",
        "cannot read --module /nonexistent.ko",
    ),
    zp(
        "offsets --module {fixtures}/good.json",
        "is not an ELF file",
    ),
    zp("offsets", "no zfs module is loaded"),
    zp("probes --target nope", "unknown target 'nope'"),
    zp("frobnicate", "unrecognized subcommand 'frobnicate'"),
    // The lab: pool options.
    lab(
        "run --layout raidz3:3 --job rw=write",
        "raidz3 needs at least 4 vdevs, got 3",
    ),
    lab(
        "run --layout bogus --job rw=write",
        "layout 'bogus': expected KIND:N",
    ),
    lab("run --ashift 20 --job rw=write", "20 is not in 9..=16"),
    lab("run --vdev-size 0 --job rw=write", "below the 64M minimum"),
    lab("run --vdev-size 1k --job rw=write", "below the 64M minimum"),
    lab("run --logs -1 --job rw=write", "unexpected argument '-1'"),
    lab(
        "run --vdev-model hdd:seek=fast --job rw=write",
        "bad duration 'fast'",
    ),
    lab(
        "run --vdev-model floppy --job rw=write",
        "unknown device model 'floppy'",
    ),
    lab(
        "run --vdev-model hdd:seek=100s --job rw=write",
        "seek must be at most 1s",
    ),
    lab(
        "run --logs 1 --log-model ssd:rate=0 --job rw=write",
        "rate '0' must be > 0",
    ),
    lab(
        "run --volblocksize 12k --job rw=write",
        "must be a power of two",
    ),
    lab(
        "run --compression lz5 --job rw=write",
        "unknown compression 'lz5'",
    ),
    lab(
        "run --checksum crc32 --job rw=write",
        "unknown checksum 'crc32'",
    ),
    lab(
        "run --sync sometimes --job rw=write",
        "unknown sync 'sometimes'",
    ),
    lab(
        "run --logbias fast --job rw=write",
        "unknown logbias 'fast'",
    ),
    lab(
        "run --primarycache data --job rw=write",
        "unknown primarycache 'data'",
    ),
    lab(
        "run --output-format xml --job rw=write",
        "invalid value 'xml' for '--output-format",
    ),
    lab("run", "required arguments were not provided"),
    // The lab: jobs.
    lab("run --job rw=trim", "unknown rw 'trim'"),
    lab(
        "run --job bs=1000",
        "bs 1000 must be a positive multiple of 512",
    ),
    lab(
        "run --job numjobs=4294967297",
        "'4294967297' is out of range",
    ),
    lab("run --job numjobs=65", "numjobs must be 1..64"),
    lab("run --job runtime=0", "'0' must be positive"),
    lab("run --job rwmixread=101", "percentages must be 0..100"),
    lab(
        "run --job buffer_compress_percentage=4294967296",
        "out of range",
    ),
    lab("run --job iodepth=4", "unknown job option 'iodepth'"),
    lab("run --job name=a/b", "job name 'a/b' must be"),
    lab("run --job bs=1m,size=64k", "larger than size"),
    lab("run --job size=1e", "bad size '1e'"),
    lab("scenario nope", "invalid value 'nope'"),
];

/// What is left of runs on the machine: processes carrying `marker` in their
/// command line, BPF programs, and zprof's or the lab's directories in /tmp.
#[derive(Debug, PartialEq)]
struct Leftovers {
    processes: Vec<String>,
    programs: BTreeSet<u32>,
    scratch: BTreeSet<String>,
}

fn leftovers(marker: &str) -> Leftovers {
    let mut processes = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.contains(marker) {
            processes.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
        }
    }
    let programs = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .map(|p| p.id())
        .collect();
    let scratch = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("zprof") && !name.starts_with("zprof-robust-"))
        .collect();
    Leftovers {
        processes,
        programs,
        scratch,
    }
}

/// Waits (up to 5 s: the kernel frees released programs after an RCU grace
/// period) until nothing beyond `before` is left.
fn assert_nothing_left(before: &Leftovers, marker: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = leftovers(marker);
        let new_programs: Vec<_> = now.programs.difference(&before.programs).collect();
        let new_scratch: Vec<_> = now.scratch.difference(&before.scratch).collect();
        if now.processes.is_empty() && new_programs.is_empty() && new_scratch.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} left behind: processes {:?}, BPF programs {new_programs:?}, directories {new_scratch:?}",
            now.processes
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Recordings that are not recordings, made from a real one.
fn make_fixtures(dir: &Path) {
    let good = dir.join("good.json");
    let output = zprof()
        .args(["record", "--target", "libzpool", "--no-explain", "-o"])
        .arg(&good)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&good).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let write_changed = |name: &str, change: &dyn Fn(&mut serde_json::Value)| {
        let mut changed = value.clone();
        change(&mut changed);
        std::fs::write(
            dir.join(name),
            serde_json::to_string_pretty(&changed).unwrap(),
        )
        .unwrap();
    };
    write_changed("negative.json", &|v| v["duration_s"] = (-10.0).into());
    write_changed("zero.json", &|v| v["duration_s"] = 0.into());
    write_changed("future.json", &|v| v["version"] = 999.into());
    write_changed("foreign.json", &|v| v["schema"] = "something-else".into());
    write_changed("negative-loss.json", &|v| {
        v["losses"]["ringbuf_full"] = (-3).into()
    });
    std::fs::write(dir.join("empty.json"), "").unwrap();
    std::fs::write(dir.join("text.json"), "hello world\n").unwrap();
    std::fs::write(dir.join("array.json"), "[]").unwrap();
    std::fs::write(dir.join("truncated.json"), &text[..text.len() / 2]).unwrap();
}

/// An offsets table of another release than the system's libzpool, which
/// `--target libzpool` traces (2.1.11: scripts/setup.sh installs it).
fn foreign_table() -> PathBuf {
    common::workspace().join("zprof/offsets/libzpool-2.3.2-debian.json")
}

#[test]
fn bad_inputs_are_refused_in_one_line_and_leave_nothing() {
    require_root();
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    assert!(CASES.len() >= 40, "the suite holds {} cases", CASES.len());
    let fixtures = common::scratch("zprof-robust", "fixtures");
    make_fixtures(&fixtures);
    let workdir = common::scratch("zprof-robust", "lab");
    // A command unique to this run: if it ever runs, it is found.
    let marker = format!("sleep 7{}.5", std::process::id());
    let foreign = foreign_table();
    let mut failures = Vec::new();
    for case in CASES {
        let args = case
            .args
            .replace("{fixtures}", fixtures.to_str().unwrap())
            .replace("{foreign_table}", foreign.to_str().unwrap())
            .replace("{marker}", &marker);
        let before = leftovers(&marker);
        let mut command = match case.bin {
            Bin::Zprof => zprof(),
            Bin::Lab => Command::new(lab_binary()),
        };
        command.args(args.split_whitespace());
        if let Bin::Lab = case.bin {
            command.arg("--dir").arg(&workdir);
        }
        let output = command.output().unwrap();
        let err = stderr(&output);
        let first = err.lines().next().unwrap_or("");
        let shown = format!("{:?} {args}", case.bin);
        if output.status.code() != Some(case.exit) {
            failures.push(format!(
                "{shown}: exit {:?}, expected {}: {err}",
                output.status.code(),
                case.exit
            ));
        } else if !first.contains(case.says) {
            failures.push(format!(
                "{shown}: first line {first:?} does not say {:?}",
                case.says
            ));
        } else if !output.stdout.is_empty() {
            failures.push(format!(
                "{shown}: printed on stdout: {}",
                String::from_utf8_lossy(&output.stdout)
            ));
        }
        assert_nothing_left(&before, &marker, &shown);
        let left = std::fs::read_dir(&workdir).unwrap().count();
        assert_eq!(left, 0, "{shown} left {left} entries in the lab's --dir");
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
    eprintln!("{} bad inputs refused, nothing left behind", CASES.len());
    std::fs::remove_dir_all(fixtures).unwrap();
    std::fs::remove_dir_all(workdir).unwrap();
}

/// Starts `zprof record --target libzpool -- sleep SECONDS` (the seconds make
/// the marker), in its own process group, and waits for its "Tracing" line
/// unless `wait_attached` is false.
fn start_recording(marker_seconds: &str, wait_attached: bool) -> Child {
    let mut child = zprof()
        .args([
            "record",
            "--target",
            "libzpool",
            "--no-explain",
            "--",
            "sleep",
            marker_seconds,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    if wait_attached {
        common::wait_until_tracing(&mut child);
    }
    child
}

/// Signals to zprof alone and to its process group, SIGKILL while attaching
/// and mid-run, and a command that exits at once: zprof's exit status is the
/// command's (or the signal's), the command never runs on after zprof, and no
/// program or probe stays.
#[test]
fn signals_leave_no_command_and_no_probe() {
    require_root();
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let seconds = format!("8{}.5", std::process::id());
    let marker = format!("sleep {seconds}");
    let before = leftovers(&marker);
    let group = |child: &Child| -(child.id() as i32);
    let alone = |child: &Child| child.id() as i32;
    // (what, whom, signal, zprof's expected exit status: None for a kill)
    type Target = fn(&Child) -> i32;
    let runs: [(&str, Target, i32, Option<i32>); 5] = [
        (
            "SIGINT to the group",
            group,
            libc::SIGINT,
            Some(128 + libc::SIGINT),
        ),
        (
            "SIGINT to zprof alone",
            alone,
            libc::SIGINT,
            Some(128 + libc::SIGINT),
        ),
        (
            "SIGTERM to zprof alone",
            alone,
            libc::SIGTERM,
            Some(128 + libc::SIGTERM),
        ),
        (
            "SIGTERM to the group",
            group,
            libc::SIGTERM,
            Some(128 + libc::SIGTERM),
        ),
        ("SIGKILL mid-run", alone, libc::SIGKILL, None),
    ];
    for (what, whom, signal, expected) in runs {
        let child = start_recording(&seconds, true);
        assert!(
            !leftovers(&marker).processes.is_empty(),
            "{what}: the command is not running"
        );
        unsafe { libc::kill(whom(&child), signal) };
        let status = child.wait_with_output().unwrap().status;
        match expected {
            Some(code) => assert_eq!(status.code(), Some(code), "{what}"),
            None => assert!(status.code().is_none(), "{what}: {status}"),
        }
        assert_nothing_left(&before, &marker, what);
    }
    // SIGKILL while attaching, at several moments: the command, held before
    // exec until the probes are in place, must never run on.
    for delay_ms in [0, 50, 150, 400, 800] {
        let child = start_recording(&seconds, false);
        std::thread::sleep(Duration::from_millis(delay_ms));
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait_with_output().unwrap();
        assert_nothing_left(
            &before,
            &marker,
            &format!("SIGKILL {delay_ms} ms after start"),
        );
    }
    // A command that exits at once: its status, once zprof has attached
    // (how long attaching takes depends on the host, and is not timed here).
    for (command, code) in [("true", 0), ("false", 1)] {
        let output = exit_after_attach(command);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{command}: {}",
            stderr(&output)
        );
    }
    assert_nothing_left(&before, &marker, "commands exiting at once");
}

/// `zprof record -- COMMAND` for a command that exits at once: waits for the
/// attach, then for zprof's exit. The limit is a hang guard (zprof waiting on
/// a command that has ended), far above the moment it takes.
fn exit_after_attach(command: &str) -> std::process::Output {
    const LIMIT: Duration = Duration::from_secs(60);
    let mut child = zprof()
        .args([
            "record",
            "--target",
            "libzpool",
            "--no-explain",
            "--",
            command,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_until_tracing(&mut child);
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    rx.recv_timeout(LIMIT).unwrap_or_else(|_| {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!(
            "`{command}` exited at once, but zprof still ran {LIMIT:?} after attaching; killed it"
        )
    })
}

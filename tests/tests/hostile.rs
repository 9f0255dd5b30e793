//! zprof under bad input and signals (issue 14): nothing is lost, nothing is
//! orphaned, nothing absurd is believed. The recording tests need root.

use std::{
    io::{Read, Write as _},
    os::unix::process::ExitStatusExt as _,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Output, Stdio},
    time::Duration,
};

mod common;
use common::{require_root, stderr, zprof};

fn scratch(name: &str) -> PathBuf {
    common::scratch("zprof-hostile", name)
}

/// An unwritable `-o` or `--flamegraph` is refused before anything runs.
#[test]
fn unwritable_outputs_are_refused_before_the_command_runs() {
    require_root();
    let dir = scratch("outputs");
    let marker = dir.join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    // A directory with a flame graph's name: the name passes, the write cannot.
    std::fs::create_dir(dir.join("graph.svg")).unwrap();
    for (flag, path, says) in [
        ("-o", dir.clone(), "it is a directory"),
        ("-o", dir.join("missing/rec.json"), "does not exist"),
        ("--flamegraph", dir.join("graph.svg"), "it is a directory"),
    ] {
        let output = zprof()
            .args(["record", "--target", "libzpool", flag])
            .arg(&path)
            .args(touch)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flag} {}: {}",
            path.display(),
            stderr(&output)
        );
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
        assert!(
            !marker.exists(),
            "the command ran although {flag} {} cannot be written",
            path.display()
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `record -d` ends the command it ran at the deadline (SIGTERM), and passes
/// its status on; the command does not run on untraced.
#[test]
fn the_duration_ends_the_command() {
    require_root();
    let sleep = sleep_command();
    let mut child = recording_of(&["-d", "1"], &sleep);
    common::wait_until_tracing(&mut child);
    let (output, _) = finish(child, HANG_GUARD, "record -d 1");
    // 143 is sleep's own status: killed by SIGTERM (had it run out, 0).
    assert_eq!(
        output.status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("the duration is over; sent SIGTERM"),
        "{}",
        stderr(&output)
    );
    assert_not_running(&sleep);
}

/// SIGINT sent to zprof alone (not to its process group) reaches the command
/// after a grace period, and zprof reports and exits with its status.
#[test]
fn sigint_to_zprof_alone_is_passed_on() {
    require_root();
    let sleep = sleep_command();
    let mut child = recording_of(&[], &sleep);
    common::wait_until_tracing(&mut child);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (output, _) = finish(child, HANG_GUARD, "SIGINT to zprof alone");
    // 130 is sleep's own status: it died of the SIGINT zprof passed on.
    assert_eq!(
        output.status.code(),
        Some(128 + libc::SIGINT),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("sent SIGINT to the command"),
        "{}",
        stderr(&output)
    );
    assert_not_running(&sleep);
}

/// Far above any expected run (a run takes seconds): past it, the test fails
/// on a hang instead of waiting forever. Not a speed bound.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// `sleep 30.PID`: about 30 s, and a command line no other test's process has.
fn sleep_command() -> [String; 2] {
    ["sleep".into(), format!("30.{}", std::process::id())]
}

/// `zprof record ARGS -- COMMAND`, stderr piped for [`common::wait_until_tracing`].
fn recording_of(args: &[&str], command: &[String]) -> Child {
    zprof()
        .args(["record", "--target", "libzpool", "--no-explain"])
        .args(args)
        .arg("--")
        .args(command)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// No process runs `command` (zprof's command ended with zprof).
fn assert_not_running(command: &[String]) {
    let wanted = command.join("\0") + "\0";
    let pids = std::fs::read_dir("/proc").unwrap().flatten().filter(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
    });
    let running: Vec<String> = pids
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        running.is_empty(),
        "`{}` still runs after zprof exited: pid {running:?}",
        command.join(" ")
    );
}

/// Waits for `child` to exit, for at most `limit`: past it, kills it and fails
/// naming `what`. Returns its output and its resource usage from wait4 on its
/// own pid: its peak RSS is its own (or of a child it reaped, if larger),
/// never that of another child of this test as with RUSAGE_CHILDREN.
fn finish(mut child: Child, limit: Duration, what: &str) -> (Output, libc::rusage) {
    let pid = child.id() as i32;
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        let _ = tx.send((reaped, status, usage));
    });
    let Ok((reaped, status, usage)) = rx.recv_timeout(limit) else {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("{what}: zprof (pid {pid}) still ran after {limit:?}; killed it");
    };
    assert_eq!(reaped, pid, "wait4 on zprof's pid {pid}");
    let output = Output {
        status: ExitStatus::from_raw(status),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (output, usage)
}

/// Reads a child's pipe to its end on a thread (so that a full pipe never blocks it).
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Durations that overflowed the clock are refused in one line.
#[test]
fn absurd_durations_are_refused() {
    for d in ["100000000000000000000", "10000000000000000000", "9000h"] {
        let output = zprof()
            .args(["record", "--target", "libzpool", "-d", d])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{d}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("at most 366 days"),
            "{}",
            stderr(&output)
        );
    }
}

/// Endless or huge files are refused without reading them whole, and a
/// read error names its cause once.
#[test]
fn endless_and_foreign_files_are_refused_at_once() {
    let child = zprof()
        .args(["report", "/dev/zero"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (output, _) = finish(child, HANG_GUARD, "report /dev/zero");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("not a JSON object"),
        "{}",
        stderr(&output)
    );
    // How much of an endless input was read: an endless pipe, counted.
    let (output, written) = report_of_endless_pipe();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("not a JSON object"),
        "{}",
        stderr(&output)
    );
    assert!(
        written < 1 << 20,
        "zprof took {written} bytes of an endless input before refusing it (it needs its first bytes)"
    );

    let dir = scratch("files");
    let big = dir.join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(300 << 20).unwrap(); // sparse: no disk used
    let output = zprof().arg("report").arg(&big).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("more than 256 MiB"),
        "{}",
        stderr(&output)
    );

    let output = zprof()
        .args(["report", "/nonexistent/rec.json"])
        .output()
        .unwrap();
    let err = stderr(&output);
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause once: {err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `zprof report /dev/stdin` on a pipe of zeros written until zprof closes it
/// (or 64 MiB): its output and the bytes the pipe took, at most what zprof
/// read plus the pipe's buffer.
fn report_of_endless_pipe() -> (Output, usize) {
    let mut child = zprof()
        .args(["report", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    // The test harness ignores SIGPIPE: a write after zprof exits fails (EPIPE).
    let writer = std::thread::spawn(move || {
        let (chunk, mut written) = ([0u8; 4096], 0);
        while written < 64 << 20 && pipe.write_all(&chunk).is_ok() {
            written += chunk.len();
        }
        written
    });
    let (output, _) = finish(child, HANG_GUARD, "report /dev/stdin on an endless pipe");
    (output, writer.join().unwrap())
}

/// Recordings whose figures cannot be measurements (a negative duration,
/// wrapped counters) are refused, not rendered.
#[test]
fn recordings_with_impossible_figures_are_refused() {
    require_root();
    let dir = scratch("impossible");
    let good = dir.join("good.json");
    let output = zprof()
        .args(["record", "--target", "libzpool", "--no-explain", "-o"])
        .arg(&good)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&good).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["duration_s"] = serde_json::json!(-10.0);
    let bad = dir.join("negative.json");
    std::fs::write(&bad, value.to_string()).unwrap();
    let output = zprof().arg("report").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("duration -10 s is not a recording's length"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A real recording with its numbers replaced at random (zeros, huge values,
/// negatives, fractions): `report` and `explain` either refuse it (exit 2,
/// one line) or render it without NaN, infinities or a panic.
#[test]
fn mutated_recordings_are_refused_or_rendered_sanely() {
    require_root();
    let dir = scratch("fuzz");
    let good = dir.join("good.json");
    let jobs = [
        "--job",
        "name=f,rw=randwrite,bs=4k,fsync=1,runtime=1",
        "--job",
        "name=r,rw=randread,bs=4k,size=4m,runtime=1",
    ];
    common::zprof_on_lab(
        "record",
        &common::lab_binary(),
        &dir,
        &good,
        &[&["--layout", "raidz1:3", "--vdev-model", "ssd"][..], &jobs].concat(),
    );
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let mut numbers = Vec::new();
    collect_number_paths(&original, &mut Vec::new(), &mut numbers);
    assert!(
        numbers.len() > 100,
        "only {} numbers in the recording",
        numbers.len()
    );
    let figures: Vec<String> = numbers
        .iter()
        .filter(|p| !p.contains("/buckets/"))
        .cloned()
        .collect();
    let values = [
        serde_json::json!(0),
        serde_json::json!(-1),
        serde_json::json!(u64::MAX),
        serde_json::json!(1e300),
        serde_json::json!(0.5),
        serde_json::json!(-1e-9),
    ];
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut refused, mut rendered) = (0, 0);
    for round in 0..200 {
        let mut mutated = original.clone();
        for _ in 0..1 + next() % 4 {
            // Mostly figures other than bucket counts: a changed bucket breaks
            // the buckets' sum and is refused, which tests little.
            let pool = if next() % 4 == 0 { &numbers } else { &figures };
            let path = &pool[(next() % pool.len() as u64) as usize];
            *pointer(&mut mutated, path) = values[(next() % values.len() as u64) as usize].clone();
        }
        let file = dir.join(format!("mutated-{round}.json"));
        std::fs::write(&file, mutated.to_string()).unwrap();
        for command in ["report", "explain"] {
            let output = zprof().arg(command).arg(&file).output().unwrap();
            let (out, err) = (String::from_utf8_lossy(&output.stdout), stderr(&output));
            match output.status.code() {
                Some(0) => {
                    rendered += 1;
                    let word = common::non_number_word(&out);
                    assert!(
                        word.is_none(),
                        "{command} round {round} printed {word:?}:\n{out}"
                    );
                    for bad in ["NaN", "panicked"] {
                        assert!(
                            !out.contains(bad) && !err.contains(bad),
                            "{command} round {round} printed {bad}:\n{out}\n{err}"
                        );
                    }
                }
                Some(2) => {
                    refused += 1;
                    assert_eq!(
                        err.trim().lines().count(),
                        1,
                        "{command} round {round}: one line, got:\n{err}"
                    );
                }
                other => panic!("{command} round {round} exited {other:?}:\n{err}"),
            }
        }
    }
    // Each must be a real share: a reader that refused every input (or
    // accepted every one) would pass the checks above without testing them.
    let total = rendered + refused;
    let counts = format!(
        "{rendered} rendered and {refused} refused of {total} (report and explain on 200 mutations)"
    );
    // About 7% render here (most hostile values are implausible and refused):
    // a fortieth is a third of that, and still 10 rendered recordings.
    assert!(
        rendered * 40 >= total,
        "{counts}: at least a fortieth must render"
    );
    assert!(
        refused * 10 >= total,
        "{counts}: at least a tenth must be refused"
    );
    eprintln!("{counts}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// JSON pointer paths of every number in `value`.
fn collect_number_paths(value: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Number(_) => out.push(format!("/{}", at.join("/"))),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(i.to_string());
                collect_number_paths(item, at, out);
                at.pop();
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                at.push(key.replace('~', "~0").replace('/', "~1"));
                collect_number_paths(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn pointer<'a>(value: &'a mut serde_json::Value, path: &str) -> &'a mut serde_json::Value {
    value.pointer_mut(path).unwrap()
}

/// `zprof offsets` without what it needs says which input is missing and
/// what provides it, and writes nothing.
#[test]
fn offsets_without_their_inputs_name_what_is_missing() {
    let dir = scratch("offsets");
    let table = dir.join("table.json");
    let cases: [(&[&str], &str); 3] = [
        (&[], "no zfs module is loaded: pass --module FILE"),
        (
            &["--module", "/nonexistent/zfs.ko"],
            "cannot read --module /nonexistent/zfs.ko",
        ),
        (
            &[
                "--module",
                "/proc/self/exe",
                "--zfs-build",
                "/nonexistent/zfs-build",
            ],
            "no configured OpenZFS tree at /nonexistent/zfs-build",
        ),
    ];
    for (args, message) in cases {
        let output = zprof()
            .arg("offsets")
            .args(args)
            .arg("-o")
            .arg(&table)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!table.exists(), "{args:?} wrote a table");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// With CAP_BPF and CAP_PERFMON but neither root nor CAP_DAC_READ_SEARCH,
/// recording a command fails on tracefs's permissions, and says so (it said
/// "mount tracefs" while tracefs was mounted).
#[test]
fn a_missing_capability_is_named() {
    require_root();
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon"])
        .arg(common::zprof_binary())
        .args([
            "record",
            "--target",
            "libzpool",
            "--no-explain",
            "--",
            "true",
        ])
        .output()
        .expect("setpriv (util-linux) runs zprof with chosen capabilities");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains("permission denied reading") && first.contains("CAP_DAC_READ_SEARCH"),
        "{err}"
    );
}

/// `zprof run` keeps a bounded part of an endless output (`yes` grew it to an
/// 8 GiB allocation in 3 s), and still stops the command at the deadline.
#[test]
fn endless_command_output_is_capped() {
    require_root();
    let child = zprof()
        .args([
            "run",
            "--target",
            "libzpool",
            "--no-explain",
            "--quiet-command",
            "-d",
            "3",
            "--",
            "yes",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (output, usage) = finish(child, HANG_GUARD, "run -d 3 -- yes");
    assert_eq!(
        output.status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        stderr(&output)
    );
    // zprof's own peak (wait4 on its pid; `yes`, which it reaped, holds about 2 MiB).
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(peak_mib < 200, "zprof peaked at {peak_mib} MiB on `yes`");
}

/// CPU samples whose stacks were lost (a stack map too small) are in the
/// report's loss line, not only in the flame graph's title.
#[test]
fn lost_stacks_are_in_the_report() {
    require_root();
    let dir = scratch("stacks");
    let output = zprof()
        .args([
            "record",
            "--target",
            "libzpool",
            "--no-explain",
            "--stack-storage-size",
            "64",
            "--sample-freq",
            "999",
            "-o",
        ])
        .arg(dir.join("rec.json"))
        .arg("--")
        .arg(common::lab_binary())
        .args([
            "run",
            "--compression",
            "zstd",
            "--job",
            "name=z,rw=write,bs=128k,size=64m,buffer_compress_percentage=50,runtime=2",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let recording: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("rec.json")).unwrap()).unwrap();
    let lost = recording["cpu"]["stack_lost"].as_u64().unwrap();
    assert!(lost > 0, "64 stack slots at 999 Hz should lose stacks");
    let report = String::from_utf8_lossy(&output.stdout);
    let line = report
        .lines()
        .find(|l| l.starts_with("lost or unmatched:"))
        .unwrap_or_else(|| panic!("no loss line:\n{report}"));
    assert!(
        line.contains(&format!(
            "CPU samples with a lost stack (of {} sampled",
            recording["cpu"]["samples_total"]
        )),
        "{line}"
    );
    assert!(line.contains(&format!(") {lost}")), "{line}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Leaving the workload group out leaves explain without the workload's rate:
/// its findings say less, never "NaN".
#[test]
fn a_skipped_workload_gives_no_nan() {
    require_root();
    let dir = scratch("skip");
    let output = zprof()
        .args(["run", "--target", "libzpool", "--skip", "workload", "--"])
        .arg(common::lab_binary())
        .args([
            "run",
            "--job",
            "name=f,rw=randwrite,bs=4k,fsync=1,runtime=1",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let word = common::non_number_word(&text);
    assert!(word.is_none(), "printed {word:?}:\n{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

//! Flame graphs from real recordings: the lab's jobs run under zprof (as root),
//! then `zprof flamegraph` renders both kinds from the same recording.

use std::path::{Path, PathBuf};

use zprof::render::flamegraph::{parse_folded, share_of as share};

mod common;
use common::ledger::Attempts;
use common::{lab_binary, run_ok, zprof};

fn scratch(name: &str) -> PathBuf {
    common::scratch("zprof-flame", name)
}

/// Records a lab job; returns the recording's path.
fn record(dir: &Path, name: &str, lab_args: &[&str]) -> PathBuf {
    record_with(dir, name, &[], lab_args)
}

/// Records a lab job with these options of `zprof record` besides the usual.
fn record_with(dir: &Path, name: &str, zprof_args: &[&str], lab_args: &[&str]) -> PathBuf {
    common::require_root();
    let recording = dir.join(format!("{name}.json"));
    run_ok(
        zprof()
            .args(["record", "--target", "libzpool", "--no-explain"])
            .args(zprof_args)
            .arg("-o")
            .arg(&recording)
            .arg("--")
            .arg(lab_binary())
            .args(["run", "--dir"])
            .arg(dir)
            .args(lab_args),
    );
    recording
}

/// Folded stacks of a recording, as `zprof flamegraph -o x.folded` writes them.
fn folded(recording: &Path, kind: &str) -> Vec<String> {
    let out = recording.with_extension(format!("{kind}.folded"));
    let status = zprof()
        .arg("flamegraph")
        .arg(recording)
        .args(["--kind", kind, "-o"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Parses the whole SVG as XML: every tag closed, every entity valid.
fn assert_valid_xml(svg: &str) {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut depth = 0i32;
    loop {
        match reader.read_event().expect("SVG is not well-formed XML") {
            quick_xml::events::Event::Start(_) => depth += 1,
            quick_xml::events::Event::End(_) => depth -= 1,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced tags");
}

#[test]
fn zstd_shows_in_cpu_samples_and_compression_off_does_not() {
    let dir = scratch("cpu");
    let job = [
        "--volblocksize",
        "128k",
        "--job",
        "name=w,rw=write,bs=128k,ios=3000,buffer_compress_percentage=50",
    ];
    let zstd = record(
        &dir,
        "zstd",
        &[&["--compression", "zstd-3"][..], &job].concat(),
    );
    let off = record(&dir, "off", &[&["--compression", "off"][..], &job].concat());
    let is_zstd = |f: &str| f.contains("zstd") || f.contains("ZSTD");
    let zstd_share = share(&folded(&zstd, "cpu"), is_zstd);
    let off_share = share(&folded(&off, "cpu"), is_zstd);
    eprintln!(
        "zstd frames: {:.0}% of CPU samples with zstd-3, {:.0}% with compression off",
        zstd_share * 100.0,
        off_share * 100.0
    );
    assert!(
        zstd_share >= 0.10,
        "zstd frames are {:.1}% of samples",
        zstd_share * 100.0
    );
    assert_eq!(off_share, 0.0, "compression off still shows zstd frames");
    // The compression frames are where the stage graph puts them too.
    assert!(share(&folded(&zstd, "stages"), |f| f == "zfs_zstd_compress") > 0.0);

    // Both kinds render from the same recording as well-formed SVG that names what it shows.
    for kind in ["cpu", "stages"] {
        let svg_path = dir.join(format!("zstd-{kind}.svg"));
        let status = zprof()
            .arg("flamegraph")
            .arg(&zstd)
            .args(["--kind", kind, "-o"])
            .arg(&svg_path)
            .status()
            .unwrap();
        assert!(status.success());
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert_valid_xml(&svg);
        assert!(svg.contains("libzpool"), "title names the target");
        assert!(svg.contains(if kind == "cpu" {
            "samples lost"
        } else {
            "lost or unmatched"
        }));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fsync_on_hdd_stage_graph_is_dominated_by_the_zil_commit() {
    let dir = scratch("stages");
    let recording = record(
        &dir,
        "fsync",
        &[
            "--layout",
            "raidz1:3",
            "--vdev-model",
            "hdd",
            "--volblocksize",
            "4k",
            "--job",
            "name=f,rw=randwrite,bs=4k,fsync=1,runtime=2",
        ],
    );
    let stacks = folded(&recording, "stages");
    // Among the workload's own time (write, fsync), the commit dominates.
    let workload: Vec<String> = stacks
        .iter()
        .filter(|l| l.starts_with("write;") || l.starts_with("fsync;"))
        .cloned()
        .collect();
    let fsync = share(&workload, |f| f == "zil_commit");
    assert!(
        fsync >= 0.8,
        "zil_commit is {:.0}% of the workload's time",
        fsync * 100.0
    );
    // Folded output round-trips: parsing and writing it back gives the same lines,
    // and rendering it again gives the same stacks.
    let rewritten: Vec<String> = parse_folded(&stacks)
        .unwrap()
        .into_iter()
        .map(|(f, w)| format!("{} {w}", f.join(";")))
        .collect();
    assert_eq!(rewritten, stacks);
    assert_eq!(folded(&recording, "stages"), stacks);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Records a lab zstd/lz4 write job (with `zprof_args`, e.g. --off-cpu).
fn record_compression(dir: &Path, name: &str, compression: &str, zprof_args: &[&str]) -> PathBuf {
    let job = "name=w,rw=write,bs=128k,ios=3000,buffer_compress_percentage=50";
    record_with(
        dir,
        name,
        zprof_args,
        &[
            "--volblocksize",
            "128k",
            "--compression",
            compression,
            "--job",
            job,
        ],
    )
}

fn load(recording: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(recording).unwrap()).unwrap()
}

/// The lab's user frames of a recording's CPU stacks: (named or placed, all).
/// Frames of the process and thread name, zprof's markers and kernel frames
/// are not user frames.
fn lab_user_frames(recording: &serde_json::Value) -> (u64, u64) {
    let (mut known, mut all) = (0, 0);
    for stack in recording["cpu"]["stacks"].as_array().unwrap() {
        let frames: Vec<&str> = stack["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        if frames[0] != "zprof-lab" {
            continue;
        }
        let count = stack["count"].as_u64().unwrap();
        let user = frames[1..]
            .iter()
            .filter(|f| !f.ends_with("_[k]") && !f.starts_with("[in ") && !f.starts_with("[cut"));
        for frame in user.filter(|f| !f.starts_with("zlab-")) {
            all += count;
            let unknown = *frame == "[unknown]"
                || frame.contains("stack lost")
                || (frame.starts_with('[') && !frame.contains(':'));
            known += if unknown { 0 } else { count };
        }
    }
    (known, all)
}

/// Checks what the issue asks of every CPU graph: frames named, stacks
/// within the cap, no run of unknown frames, losses under 1%.
fn assert_clean_cpu_stacks(recording: &Path, label: &str) {
    let lost = assert_clean_cpu_stacks_but_losses(recording, label);
    assert!(
        lost < MAX_LOST,
        "{label}: {:.2}% of samples lost their stack",
        lost * 100.0
    );
}

/// The share of CPU samples whose stack may be lost.
const MAX_LOST: f64 = 0.01;

/// Everything [`assert_clean_cpu_stacks`] checks but the losses; returns the
/// share of samples whose stack was lost.
fn assert_clean_cpu_stacks_but_losses(recording: &Path, label: &str) -> f64 {
    let value = load(recording);
    let (known, all) = lab_user_frames(&value);
    let named = known as f64 / all.max(1) as f64;
    let cpu = &value["cpu"];
    let lost = cpu["stack_lost"].as_u64().unwrap() as f64
        / cpu["samples_total"].as_u64().unwrap().max(1) as f64;
    eprintln!(
        "{label}: {:.1}% of the lab's user frames named or placed ({known} of {all}); {:.2}% of samples lost",
        named * 100.0,
        lost * 100.0
    );
    assert!(
        named >= 0.95,
        "{label}: only {:.1}% of user frames named",
        named * 100.0
    );
    let depth = cpu["stack_depth"].as_u64().unwrap() as usize;
    assert_eq!(depth, 64);
    for stack in cpu["stacks"].as_array().unwrap() {
        let frames = stack["frames"].as_array().unwrap();
        let user = frames
            .iter()
            .filter(|f| !f.as_str().unwrap().ends_with("_[k]"))
            .count();
        // Process, thread, stage and cut markers come on top of the user frames.
        assert!(
            user <= depth + 4 && frames.len() - user <= depth,
            "{label}: a stack deeper than the cap: {frames:?}"
        );
    }
    for line in folded(recording, "cpu") {
        assert!(
            !line.contains("[unknown];[unknown]"),
            "{label}: a run of unknown frames: {line}"
        );
    }
    lost
}

#[test]
fn cpu_graphs_name_the_lab_even_with_both_cores_busy() {
    let dir = scratch("named");
    let quiet = record_compression(&dir, "quiet", "zstd-3", &[]);
    assert_clean_cpu_stacks(&quiet, "idle machine");
    // Two busy loops, one per core, for the second run.
    let mut spinners: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    // With both cores busy the 250 ms drains of the stack maps run late, and
    // a fuller map refuses more stacks (1.56% once in CI): the losses get a
    // second run, both in the ledger; the naming is checked on every run.
    const TEST: &str = "cpu_graphs_name_the_lab_even_with_both_cores_busy";
    let mut attempts = Attempts::new(
        TEST,
        "zstd-3 with both cores busy: samples lost under 1%",
        2,
    );
    while attempts.again() {
        let busy = record_compression(&dir, "busy", "zstd-3", &[]);
        let lost = assert_clean_cpu_stacks_but_losses(&busy, "both cores busy");
        attempts.attempt(
            lost < MAX_LOST,
            format!("{:.2}% of samples lost their stack", lost * 100.0),
        );
    }
    for spinner in &mut spinners {
        spinner.kill().unwrap();
        spinner.wait().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    attempts.verdict().unwrap();
}

/// Percentages after `name ` in a wall-clock title, e.g. "on CPU 43%".
fn percent_after(text: &str, name: &str) -> f64 {
    let at = text
        .find(&format!("{name} "))
        .unwrap_or_else(|| panic!("no {name:?} in {text}"))
        + name.len()
        + 1;
    text[at..].split('%').next().unwrap().parse().unwrap()
}

#[test]
fn wall_clock_title_states_the_split_and_the_differential_graph_shows_zstd_grown() {
    let dir = scratch("wall");
    // Off-CPU stacks are drained like the samples': under 1% of periods lose
    // theirs. CI of ec55f8f lost 354 of 11,583 once (3%) where three runs
    // after it lost 0, 1 and 0, as when a drain of the stack maps runs late:
    // a second pair of runs, both in the ledger.
    const TEST: &str = "wall_clock_title_states_the_split";
    let mut attempts = Attempts::new(TEST, "off-CPU periods lost their stack under 1%", 2);
    let (mut lz4, mut zstd) = (PathBuf::new(), PathBuf::new());
    while attempts.again() {
        lz4 = record_compression(&dir, "lz4", "lz4", &["--off-cpu"]);
        zstd = record_compression(&dir, "zstd", "zstd-3", &["--off-cpu"]);
        let losses: Vec<(u64, u64)> = [&lz4, &zstd]
            .iter()
            .map(|recording| {
                let offcpu = &load(recording)["offcpu"];
                (
                    offcpu["stack_lost"].as_u64().unwrap(),
                    offcpu["periods"].as_u64().unwrap(),
                )
            })
            .collect();
        attempts.attempt(
            losses
                .iter()
                .all(|(lost, periods)| *periods > 1_000 && lost * 100 < *periods),
            format!("lz4, zstd-3: (lost, periods) {losses:?}"),
        );
    }
    attempts.verdict().unwrap();

    // The wall-clock view: its roots are the categories; the title's split is
    // theirs, and its on-CPU time is the CPU samples' time.
    let lines = folded(&zstd, "wall");
    let parsed = parse_folded(&lines).unwrap();
    let total: u64 = parsed.iter().map(|(_, w)| w).sum();
    let under = |prefix: &str| {
        parsed
            .iter()
            .filter(|(f, _)| f[0].starts_with(prefix))
            .map(|(_, w)| w)
            .sum::<u64>()
    };
    let value = load(&zstd);
    let hz = value["cpu"]["frequency_hz"].as_u64().unwrap();
    let sampled: u64 = value["cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        under("on CPU"),
        sampled * (1_000_000 / hz),
        "on-CPU width is the samples' time"
    );
    let svg_path = dir.join("wall.svg");
    let status = zprof()
        .arg("flamegraph")
        .arg(&zstd)
        .args(["--kind", "wall", "-o"])
        .arg(&svg_path)
        .status()
        .unwrap();
    assert!(status.success());
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert_valid_xml(&svg);
    let share = |us: u64| us as f64 * 100.0 / total as f64;
    for (name, prefix) in [
        ("on CPU", "on CPU"),
        ("waiting", "waiting"),
        ("compression", "on CPU: compression"),
    ] {
        let stated = percent_after(&svg, name);
        assert!(
            (stated - share(under(prefix))).abs() <= 0.5,
            "title says {name} {stated}%, graph {:.1}%",
            share(under(prefix))
        );
    }
    assert!(
        share(under("on CPU: compression")) >= 5.0,
        "zstd-3 shows compression in the wall clock"
    );

    // lz4 against zstd-3, per workload operation: zstd's frames grew, red.
    let diff = dir.join("diff.folded");
    let status = zprof()
        .arg("compare")
        .arg(&lz4)
        .arg(&zstd)
        .arg("--flamegraph")
        .arg(&diff)
        .status()
        .unwrap();
    assert!(status.success());
    let (mut before, mut after) = (0u64, 0u64);
    for line in std::fs::read_to_string(&diff)
        .unwrap()
        .lines()
        .filter(|l| l.to_lowercase().contains("zstd"))
    {
        let mut counts = line.rsplitn(3, ' ');
        after += counts.next().unwrap().parse::<u64>().unwrap();
        before += counts.next().unwrap().parse::<u64>().unwrap();
    }
    eprintln!("zstd frames: {before} samples in lz4's run (per op), {after} in zstd-3's");
    assert!(
        after > before + 20,
        "zstd frames did not grow: {before} -> {after}"
    );
    let diff_svg = dir.join("diff.svg");
    let status = zprof()
        .arg("compare")
        .arg(&lz4)
        .arg(&zstd)
        .arg("--flamegraph")
        .arg(&diff_svg)
        .status()
        .unwrap();
    assert!(status.success());
    let svg = std::fs::read_to_string(&diff_svg).unwrap();
    assert_valid_xml(&svg);
    let red_zstd = svg
        .split("<title>")
        .any(|g| g.to_lowercase().starts_with("zfs_zstd") && g.contains("fill=\"rgb(255,"));
    assert!(
        red_zstd,
        "no zstd frame drawn red in the differential graph"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// zfs recv of one 16 MiB stream on the guest's zfs.ko (tests/data/README.md):
/// nearly all of a receive's time is its wait for the txg syncs that
/// compress and write what it read. The workload graph splits that wait by
/// what the syncs did, so under zstd-19 its widest frame is compression and
/// with compression off the disks; the stage graph has one txg_wait_synced
/// frame for both.
#[test]
fn a_receives_workload_graph_is_compression_under_zstd_19_and_the_disks_uncompressed() {
    let dir = scratch("workload");
    for (setting, widest) in [("zstd-19", "compression"), ("off", "disk I/O")] {
        let recording = common::data_dir().join(format!("guest-2.4.4-recv-{setting}.json"));
        for out in ["folded", "svg"] {
            let status = zprof()
                .arg("flamegraph")
                .arg(&recording)
                .args(["--kind", "workload", "-o"])
                .arg(dir.join(format!("{setting}.{out}")))
                .status()
                .unwrap();
            assert!(status.success(), "{setting} {out}");
        }
        let lines: Vec<String> = std::fs::read_to_string(dir.join(format!("{setting}.folded")))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let mut roots = std::collections::BTreeMap::<String, u64>::new();
        for (frames, weight) in parse_folded(&lines).unwrap() {
            *roots.entry(frames[0].clone()).or_default() += weight;
        }
        let all: u64 = roots.values().sum();
        let (root, weight) = roots.iter().max_by_key(|(_, w)| **w).unwrap();
        assert_eq!(root, widest, "{setting}: {roots:?}");
        assert!(*weight as f64 > 0.5 * all as f64, "{setting}: {roots:?}");
        assert!(
            !roots.contains_key("txg_wait_synced"),
            "{setting}: {roots:?}"
        );
        let svg = std::fs::read_to_string(dir.join(format!("{setting}.svg"))).unwrap();
        assert_valid_xml(&svg);
        assert!(svg.contains("zprof workload time by cause"), "{setting}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `go tool pprof -top` of a profile: its total and each function's flat
/// value, in the unit `-unit` asks for (ns, or plain counts).
fn pprof_top(profile: &Path, sample_index: &str) -> (f64, Vec<(String, f64)>) {
    let output = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=1000", "-unit=ns"])
        .arg(format!("-sample_index={sample_index}"))
        .arg(profile)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("no go: cargo xtask setup installs Debian's golang-go");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "go tool pprof: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let number = |word: &str| -> f64 {
        word.trim_end_matches("ns")
            .trim_end_matches(',')
            .parse()
            .unwrap()
    };
    let total = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .and_then(|l| l.split(" of ").nth(1))
        .map(|t| number(t.split_whitespace().next().unwrap()))
        .unwrap_or_else(|| panic!("no total in {text}"));
    // Rows: flat flat% sum% cum cum% name (the name may hold spaces).
    let rows = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words[5..].join(" "), number(words[0]))
        })
        .collect();
    (total, rows)
}

/// The pprof profiles of a real recording (the lab's zstd-3 writes, with
/// CPU samples and off-CPU stacks) open in `go tool pprof` (Debian's
/// golang-go) with the folded stacks' totals and top functions: CPU samples,
/// and off-CPU and stage time in nanoseconds (folded weights are in us).
#[test]
fn pprof_profiles_open_in_go_tool_pprof_with_the_folded_stacks_totals() {
    let dir = scratch("pprof");
    let recording = record_compression(&dir, "zstd", "zstd-3", &["--off-cpu"]);
    for (kind, sample_index, unit) in [
        ("cpu", "samples", 1.0),
        ("off-cpu", "off_cpu", 1e3),
        ("stages", "stage", 1e3),
    ] {
        let lines = folded(&recording, kind);
        let profile = dir.join(format!("{kind}.profile"));
        run_ok(
            zprof()
                .arg("flamegraph")
                .arg(&recording)
                .args(["--kind", kind, "--format", "pprof", "-o"])
                .arg(&profile),
        );
        let stacks = parse_folded(&lines).unwrap();
        let folded_total = stacks.iter().map(|(_, w)| *w as f64 * unit).sum::<f64>();
        let mut flat: std::collections::BTreeMap<String, f64> = Default::default();
        for (frames, weight) in &stacks {
            *flat.entry(frames.last().unwrap().clone()).or_default() += *weight as f64 * unit;
        }
        let (total, rows) = pprof_top(&profile, sample_index);
        eprintln!(
            "{kind}: go tool pprof total {total}, folded {folded_total}; top: {}",
            rows.iter()
                .take(3)
                .map(|(n, v)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(total, folded_total, "{kind}: the totals");
        assert!(!rows.is_empty());
        // The top five by flat value (pprof lists frames of no flat value too).
        for (name, value) in rows.iter().filter(|(_, v)| *v > 0.0).take(5) {
            assert_eq!(Some(value), flat.get(name), "{kind}: {name}'s flat value");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

//! Flame graphs from real recordings: the lab's jobs run under zprof (as root),
//! then `zprof flamegraph` renders both kinds from the same recording.

use std::path::{Path, PathBuf};

use zprof::flamegraph::{parse_folded, share_of as share};

mod common;
use common::{lab_binary, zprof};

fn scratch(name: &str) -> PathBuf {
    common::scratch("zprof-flame", name)
}

/// Records a lab job; returns the recording's path.
fn record(dir: &Path, name: &str, lab_args: &[&str]) -> PathBuf {
    common::require_root();
    let recording = dir.join(format!("{name}.json"));
    let output = zprof()
        .args(["record", "--target", "libzpool", "--no-explain", "-o"])
        .arg(&recording)
        .arg("--")
        .arg(lab_binary())
        .args(["run", "--dir"])
        .arg(dir)
        .args(lab_args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    recording
}

/// Folded stacks of a recording, as `zprof flamegraph -o x.folded` writes them.
fn folded(recording: &Path, kind: &str) -> Vec<String> {
    let out = recording.with_extension(format!("{kind}.folded"));
    let status = zprof().arg("flamegraph").arg(recording).args(["--kind", kind, "-o"]).arg(&out).status().unwrap();
    assert!(status.success());
    std::fs::read_to_string(&out).unwrap().lines().map(str::to_owned).collect()
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
    let job = ["--volblocksize", "128k", "--job", "name=w,rw=write,bs=128k,ios=3000,buffer_compress_percentage=50"];
    let zstd = record(&dir, "zstd", &[&["--compression", "zstd-3"][..], &job].concat());
    let off = record(&dir, "off", &[&["--compression", "off"][..], &job].concat());
    let is_zstd = |f: &str| f.contains("zstd") || f.contains("ZSTD");
    let zstd_share = share(&folded(&zstd, "cpu"), is_zstd);
    let off_share = share(&folded(&off, "cpu"), is_zstd);
    eprintln!("zstd frames: {:.0}% of CPU samples with zstd-3, {:.0}% with compression off", zstd_share * 100.0, off_share * 100.0);
    assert!(zstd_share >= 0.10, "zstd frames are {:.1}% of samples", zstd_share * 100.0);
    assert_eq!(off_share, 0.0, "compression off still shows zstd frames");
    // The compression frames are where the stage graph puts them too.
    assert!(share(&folded(&zstd, "stages"), |f| f == "zfs_zstd_compress") > 0.0);

    // Both kinds render from the same recording as well-formed SVG that names what it shows.
    for kind in ["cpu", "stages"] {
        let svg_path = dir.join(format!("zstd-{kind}.svg"));
        let status = zprof().arg("flamegraph").arg(&zstd).args(["--kind", kind, "-o"]).arg(&svg_path).status().unwrap();
        assert!(status.success());
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert_valid_xml(&svg);
        assert!(svg.contains("libzpool"), "title names the target");
        assert!(svg.contains(if kind == "cpu" { "samples lost" } else { "lost or unmatched" }));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fsync_on_hdd_stage_graph_is_dominated_by_the_zil_commit() {
    let dir = scratch("stages");
    let recording = record(
        &dir,
        "fsync",
        &["--layout", "raidz1:3", "--vdev-model", "hdd", "--volblocksize", "4k", "--job", "name=f,rw=randwrite,bs=4k,fsync=1,runtime=2"],
    );
    let stacks = folded(&recording, "stages");
    // Among the workload's own time (write, fsync), the commit dominates.
    let workload: Vec<String> =
        stacks.iter().filter(|l| l.starts_with("write;") || l.starts_with("fsync;")).cloned().collect();
    let fsync = share(&workload, |f| f == "zil_commit");
    assert!(fsync >= 0.8, "zil_commit is {:.0}% of the workload's time", fsync * 100.0);
    // Folded output round-trips: parsing and writing it back gives the same lines,
    // and rendering it again gives the same stacks.
    let rewritten: Vec<String> =
        parse_folded(&stacks).unwrap().into_iter().map(|(f, w)| format!("{} {w}", f.join(";"))).collect();
    assert_eq!(rewritten, stacks);
    assert_eq!(folded(&recording, "stages"), stacks);
    std::fs::remove_dir_all(dir).unwrap();
}

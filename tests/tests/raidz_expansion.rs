//! RAIDZ expansion (OpenZFS 2.3 and later) as zprof sees it: a raidz1 of
//! three ssd models holding 256 MiB is expanded by a fourth file once the
//! data is laid out, and random reads run while ZFS reflows it. On each
//! release that has expansion, zprof's leaf rows at the removal priority
//! are the lab's own count of them (the lab counts every queued leaf I/O at
//! that priority in libzpool's completion path), explain names the pool
//! with the reflow's figures and the workload's rate with and without it,
//! and the write amplification leaves the copies out. On 2.1 the lab refuses
//! the option, naming the release. Needs root.

use serde_json::Value;

mod common;
use common::{class_field, explain_json, figure, lab_releases, require_root, zprof_on_lab};

const EXPAND: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--vdev-size",
    "4g",
    "--expand-raidz",
    "--volblocksize",
    "16k",
    "--primarycache",
    "metadata",
    "--job",
    "name=rr,rw=randread,bs=4k,size=256m,runtime=6",
];

/// The sum of `field` over a recording's vdev_disk rows of one class.

#[test]
fn reflow_io_is_counted_and_named_with_its_cost_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-expand", &release.version);
        if !release.at_least(2, 3) {
            let out = std::process::Command::new(&release.lab)
                .args(["run", "--dir"])
                .arg(&dir)
                .args(EXPAND)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(
                stderr.contains("RAIDZ expansion came in OpenZFS 2.3"),
                "{stderr}"
            );
            std::fs::remove_dir_all(dir).unwrap();
            continue;
        }
        let recording = dir.join("expand.json");
        let lab = zprof_on_lab("run", &release.lab, &dir, &recording, EXPAND);
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        let (reads, writes) = (
            class_field(&rec, "vdev_disk", "removal/reflow (read)", "count"),
            class_field(&rec, "vdev_disk", "removal/reflow (write)", "count"),
        );
        let read_bytes = class_field(&rec, "vdev_disk", "removal/reflow (read)", "bytes");
        let totals = &lab["totals"];
        let reflow = &lab["jobs"][0]["reflow"];
        eprintln!(
            "{}: reflow leaf reads/writes zprof {reads}/{writes}, the lab's {}/{}; moved {} of {} bytes during the job",
            release.version,
            totals["removal_reads"],
            totals["removal_writes"],
            reflow["reflowed_bytes"],
            reflow["to_reflow_bytes"]
        );
        assert!(writes > 0, "no reflow writes recorded");
        assert_eq!(reads, totals["removal_reads"].as_u64().unwrap());
        assert_eq!(writes, totals["removal_writes"].as_u64().unwrap());
        // The reflow reads each allocated byte of the old layout once (the
        // job only reads: the vdev's allocation barely moves), plus the gaps
        // that aggregation bridges, at most zfs_vdev_read_gap_limit (32 KiB)
        // per read.
        if reflow["finished"] == true {
            let to_reflow = reflow["to_reflow_bytes"].as_u64().unwrap() as f64;
            let ratio = read_bytes as f64 / to_reflow;
            eprintln!("  reflow read {read_bytes} bytes for {to_reflow} allocated ({ratio:.4})");
            assert!(
                ratio > 0.99 && read_bytes as f64 <= to_reflow + reads as f64 * 32768.0,
                "reflow read {read_bytes} bytes for {to_reflow} allocated"
            );
        }

        let findings = explain_json(&recording, &[]);
        let pool = lab["jobs"][0]["pool"]["name"].as_str().unwrap();
        let expansion = findings
            .iter()
            .find(|f| f["kind"] == "raidz_expansion")
            .unwrap_or_else(|| panic!("no raidz_expansion finding: {findings:#?}"));
        eprintln!("  {}", expansion["title"]);
        for line in expansion["evidence"].as_array().unwrap() {
            eprintln!("    {}", line.as_str().unwrap());
        }
        assert_eq!(expansion["pool"], pool);
        assert_eq!(figure(expansion, "reflow_writes"), writes as f64);
        assert_eq!(figure(expansion, "reflow_reads"), reads as f64);
        let amplification = findings
            .iter()
            .find(|f| f["kind"] == "write_amplification")
            .expect("a write amplification finding");
        assert!(
            amplification["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l.as_str().unwrap().starts_with("left out: ")),
            "the copies are not the workload's writes: {amplification:#}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

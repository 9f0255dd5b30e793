//! Checks of the guest's runs of real commands under `zprof run`: `zfs recv`
//! of one stream under each compression setting (`/results/recv`), and a
//! stream of random data into zvols of 8k and 1M blocks on a raidz2
//! (`/results/zvol-stream`).
//!
//! - recv: each receive's row read the stream's bytes (its file's size,
//!   within [`BYTES_SHARE`]: the begin record zfs(8) reads itself is not
//!   the kernel's); under zstd, the compression rows' ratio of the setting's
//!   level equals the received dataset's compressratio within
//!   [`RATIO_SHARE`] (under lz4 the metadata's lz4 rows mix in: the pool
//!   compresses its metadata with lz4 whatever the setting); the
//!   recording's benchmark is the command's wall time; and where two
//!   settings' wall times differ by more than a fifth, zprof's time for the
//!   receive (dmu_recv_stream, then its wait for the txg to sync) orders
//!   them the same way.
//! - zvol stream: the zvol's write requests hold the 64 MiB dd wrote; the
//!   1M zvol took them faster than the 8k one, and its leaves wrote fewer
//!   bytes per byte (explain's write amplification figure).

use std::path::Path;

use anyhow::{anyhow, ensure};
use serde_json::Value;

use super::results::{histograms, read_json};

/// The settings the script receives under, in its order.
const SETTINGS: [&str; 5] = ["off", "lz4", "zstd-fast", "zstd-3", "zstd-19"];

/// How far a receive's stream bytes may be from the stream file's size.
const BYTES_SHARE: f64 = 0.01;

/// How far the compression rows' ratio may be from the dataset's compressratio.
const RATIO_SHARE: f64 = 0.02;

/// Wall times closer than this share are not ordered.
const TIME_SHARE: f64 = 0.2;

/// One receive's figures.
struct Received {
    setting: &'static str,
    wall_s: f64,
    recv_ns: u64,
    ratio: Option<f64>,
}

/// Checks the recv run in `dir`.
pub fn check_recv(dir: &Path) -> anyhow::Result<String> {
    let stream: u64 = std::fs::read_to_string(dir.join("stream-bytes.txt"))?
        .trim()
        .parse()?;
    let mut received = Vec::new();
    for setting in SETTINGS {
        received.push(check_one_recv(dir, setting, stream)?);
    }
    for a in &received {
        for b in &received {
            if a.wall_s > b.wall_s * (1.0 + TIME_SHARE) {
                ensure!(
                    a.recv_ns > b.recv_ns,
                    "{} took {:.2} s, {} {:.2} s, but zprof timed the receives {} and {} ns",
                    a.setting,
                    a.wall_s,
                    b.setting,
                    b.wall_s,
                    a.recv_ns,
                    b.recv_ns
                );
            }
        }
    }
    let table: Vec<String> = received
        .iter()
        .map(|r| {
            format!(
                "{} {:.2} s ({:.2} s receiving and waiting for the txg{})",
                r.setting,
                r.wall_s,
                r.recv_ns as f64 / 1e9,
                r.ratio
                    .map(|x| format!(", ratio {x:.2}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Ok(format!(
        "a {stream}-byte stream received: {}",
        table.join("; ")
    ))
}

fn check_one_recv(dir: &Path, setting: &'static str, stream: u64) -> anyhow::Result<Received> {
    let rec = read_json(&dir.join(format!("recv-{setting}.json")))?;
    let rows: Vec<&Value> = histograms(&rec, "recv")
        .filter(|h| h["pool"] == "sr")
        .collect();
    let sum = |field: &str| {
        rows.iter()
            .map(|h| h[field].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    ensure!(
        sum("count") == 1,
        "{setting}: {} receives recorded",
        sum("count")
    );
    let bytes = sum("bytes");
    ensure!(
        (bytes as f64 - stream as f64).abs() <= BYTES_SHARE * stream as f64,
        "{setting}: the receive read {bytes} stream bytes, the stream has {stream}"
    );
    let wall_s = rec["benchmark"]["wall_s"].as_f64().ok_or_else(|| {
        anyhow!(
            "{setting}: the benchmark has no wall time: {}",
            rec["benchmark"]
        )
    })?;
    let ratio = compression_ratio(&rec, setting);
    if let Some(ours) = ratio {
        let text = std::fs::read_to_string(dir.join(format!("ratio-{setting}.txt")))?;
        let theirs: f64 = text.trim().trim_end_matches('x').parse()?;
        ensure!(
            (ours / theirs - 1.0).abs() <= RATIO_SHARE,
            "{setting}: the compression rows' ratio {ours:.3}, the dataset's compressratio {theirs}"
        );
    }
    let waited: u64 = histograms(&rec, "txg_wait_synced")
        .map(|h| h["total_ns"].as_u64().unwrap_or(0))
        .sum();
    Ok(Received {
        setting,
        wall_s,
        recv_ns: sum("total_ns") + waited,
        ratio,
    })
}

/// The ratio (bytes in over bytes out) of the compression rows of the
/// setting's zstd level (`zstd-fast` is zstd-fast-1); None for the others.
fn compression_ratio(rec: &Value, setting: &str) -> Option<f64> {
    if !setting.starts_with("zstd") {
        return None;
    }
    let algorithm = if setting == "zstd-fast" {
        "zstd-fast-1"
    } else {
        setting
    };
    let rows: Vec<&Value> = histograms(rec, "compress")
        .filter(|h| h["pool"] == "sr" && h["class_name"] == algorithm)
        .collect();
    let sum = |field: &str| {
        rows.iter()
            .map(|h| h[field].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    (sum("bytes_out") > 0).then(|| sum("bytes") as f64 / sum("bytes_out") as f64)
}

/// Checks the zvol stream run in `dir`.
pub fn check_zvol_stream(dir: &Path) -> anyhow::Result<String> {
    const WRITTEN: u64 = 64 << 20;
    let mut lines = Vec::new();
    let mut figures = Vec::new();
    for vbs in ["8k", "1M"] {
        let rec = read_json(&dir.join(format!("{vbs}.json")))?;
        let requested: u64 = rec["requests"]
            .as_array()
            .ok_or_else(|| anyhow!("{vbs}: no request rows"))?
            .iter()
            .filter(|r| r["layer"] == "zvol" && r["op"] == "write")
            .map(|r| r["bytes"].as_u64().unwrap_or(0))
            .sum();
        ensure!(
            requested == WRITTEN,
            "{vbs}: the zvol's write requests hold {requested} bytes, dd wrote {WRITTEN}"
        );
        let wall_s = rec["benchmark"]["wall_s"]
            .as_f64()
            .ok_or_else(|| anyhow!("{vbs}: the benchmark has no wall time"))?;
        let explain = read_json(&dir.join(format!("{vbs}-explain.json")))?;
        let amplification = explain
            .as_array()
            .and_then(|f| f.iter().find(|f| f["kind"] == "write_amplification"))
            .and_then(|f| figure(f, "write_amplification"))
            .ok_or_else(|| {
                anyhow!("{vbs}: explain has no write amplification figure: {explain}")
            })?;
        lines.push(format!(
            "{vbs}: {:.1} MiB/s, leaves wrote {amplification:.2} bytes per byte",
            WRITTEN as f64 / wall_s / 1048576.0
        ));
        figures.push((wall_s, amplification));
    }
    ensure!(
        figures[1].0 < figures[0].0 && figures[1].1 < figures[0].1,
        "the 1M zvol was not faster and leaner than the 8k one: {}",
        lines.join("; ")
    );
    Ok(lines.join("; "))
}

fn figure(finding: &Value, name: &str) -> Option<f64> {
    finding["figures"]
        .as_array()?
        .iter()
        .find(|f| f[0] == name)?[1]
        .as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest run's results, where ZPROF_GUEST_RESULTS names them (the
    /// directory `guest run -- zfs-kernel-test.sh --only=benchmarks` fills).
    #[test]
    #[ignore = "needs a guest run's results"]
    fn a_guest_runs_benchmarks_pass() {
        let dir = std::path::PathBuf::from(std::env::var("ZPROF_GUEST_RESULTS").unwrap());
        eprintln!("{}", check_recv(&dir.join("recv")).unwrap());
        eprintln!("{}", check_zvol_stream(&dir.join("zvol-stream")).unwrap());
    }
}

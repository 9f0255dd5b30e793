//! Checks of the guest's runs of real commands under `zprof run`: `zfs recv`
//! of one stream under each compression setting (`/results/recv`), a
//! stream of random data into zvols of 8k and 1M blocks on a raidz2
//! (`/results/zvol-stream`), and pgbench on PostgreSQL (`/results/pgbench`,
//! see [`check_pgbench`]).
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
//!   them the same way; explain says the syncs' write-out waited on
//!   compression under zstd-19, and on the disks with compression off; and
//!   the workload flame graph's widest frame is compression under zstd-19,
//!   not with compression off; `zprof compare` of the five has a row each,
//!   zstd-19's named for its setting with the most compression time, and
//!   compression off's leaves wrote the most.
//! - zvol stream: the zvol's write requests hold the 64 MiB dd wrote; the
//!   1M zvol took them faster than the 8k one, and its leaves wrote fewer
//!   bytes per byte (explain's write amplification figure).

use std::path::Path;

use anyhow::{anyhow, bail, ensure};
use serde_json::Value;

use super::results::{figure, histograms, read_json};

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
    let mut widest = Vec::new();
    for (setting, paced_by_compression) in [("zstd-19", true), ("off", false)] {
        check_sync_pace(dir, setting, paced_by_compression)?;
        let (root, share) = widest_root(dir, setting)?;
        ensure!(
            (root == "compression") == paced_by_compression,
            "{setting}: the workload flame graph's widest frame is {root} ({:.0}%)",
            share * 100.0
        );
        widest.push(format!("{setting}: {root} {:.0}%", share * 100.0));
    }
    check_settings_table(dir)?;
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
        "a {stream}-byte stream received: {}; the workload flame graphs' widest frames: {}",
        table.join("; "),
        widest.join(", ")
    ))
}

/// `zprof compare`'s row per setting (settings.json), in [`SETTINGS`]' order.
fn check_settings_table(dir: &Path) -> anyhow::Result<()> {
    let table = read_json(&dir.join("settings.json"))?;
    let rows = table.as_array().map(Vec::as_slice).unwrap_or_default();
    ensure!(
        rows.len() == SETTINGS.len(),
        "compare has {} rows: {table}",
        rows.len()
    );
    let field = |row: &Value, name: &str| row[name].as_u64().unwrap_or(0);
    let most = |name: &str| {
        rows.iter()
            .enumerate()
            .max_by_key(|(_, r)| field(r, name))
            .map(|(i, _)| SETTINGS[i])
    };
    ensure!(
        most("compression_ns") == Some("zstd-19") && most("leaf_bytes") == Some("off"),
        "compare's rows: {table}"
    );
    let zstd = &rows[SETTINGS.len() - 1]["main_compression"][0];
    ensure!(zstd == "zstd-19", "zstd-19's main setting is {zstd}");
    Ok(())
}

/// The widest root frame of a receive's workload flame graph
/// (recv-SETTING.folded), and its share of the graph.
fn widest_root(dir: &Path, setting: &str) -> anyhow::Result<(String, f64)> {
    let text = std::fs::read_to_string(dir.join(format!("recv-{setting}.folded")))?;
    let mut roots = std::collections::BTreeMap::<String, u64>::new();
    for line in text.lines() {
        let (stack, weight) = line
            .rsplit_once(' ')
            .ok_or_else(|| anyhow!("{setting}: not a folded line: {line}"))?;
        let root = stack.split(';').next().unwrap_or(stack).to_owned();
        *roots.entry(root).or_default() += weight.parse::<u64>()?;
    }
    let all: u64 = roots.values().sum();
    roots
        .into_iter()
        .max_by_key(|(_, w)| *w)
        .map(|(root, w)| (root, w as f64 / all.max(1) as f64))
        .ok_or_else(|| anyhow!("{setting}: an empty workload flame graph"))
}

/// Whether explain's txg-sync finding of a receive says compression set
/// the pace of its write-out (a receive whose syncs were too short for the
/// finding was not paced by anything).
fn check_sync_pace(dir: &Path, setting: &str, paced_by_compression: bool) -> anyhow::Result<()> {
    let explain = read_json(&dir.join(format!("recv-{setting}-explain.json")))?;
    let action = explain
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "txg_sync_phases"))
        .and_then(|f| f["action"].as_str());
    let Some(action) = action else {
        ensure!(
            !paced_by_compression,
            "{setting}: explain has no txg sync finding: {explain}"
        );
        return Ok(());
    };
    ensure!(
        action.starts_with("Compression (") == paced_by_compression,
        "{setting}: the txg sync finding's action is \"{action}\""
    );
    Ok(())
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

/// How far zprof's fsyncs from the server may be from PostgreSQL's count.
const FSYNC_SHARE: f64 = 0.02;

/// How far the SLOG what-if's commits per second may be from the log
/// vdev's run.
const SLOG_SHARE: f64 = 0.30;

/// The pgbench cases the script runs, recordsize and log.
const PGBENCH_CASES: [(&str, &str); 4] = [
    ("8k", "nolog"),
    ("8k", "log"),
    ("128k", "nolog"),
    ("128k", "log"),
];

/// Checks the pgbench runs in `dir` (none where the cell's image has no
/// PostgreSQL: the newest cell's has):
/// - the fsync requests zprof counts from the server's processes (comm
///   postgres) equal PostgreSQL's own count, its WAL syncs (pg_stat_wal's
///   wal_sync, reset after the start) plus the files its checkpoints synced
///   (log_checkpoints' "sync files=N"), within [`FSYNC_SHARE`]; both with
///   the server's start and stop taken off, as a run without pgbench
///   measured them;
/// - the recording's benchmark tps is the one pgbench printed;
/// - the SLOG what-if of the run without a log vdev, on the log vdev of the
///   run with one as that run measured it (`zprof compare`: the guest's log
///   vdev is a file, not the what-if's SSD), predicts its commits per
///   second within [`SLOG_SHARE`], from the pool's gap between commits (the
///   commits run one at a time: PostgreSQL flushes its WAL under a lock);
///   where the run with the log vdev's gap fell outside the model's range,
///   the host, not the device, changed, and the miss cannot be checked here.
///   Commits, not sync writes: the WAL pages per commit fall with a faster
///   commit for PostgreSQL's own reasons (full-page images).
pub fn check_pgbench(dir: &Path) -> anyhow::Result<String> {
    if let Ok(why) = std::fs::read_to_string(dir.join("absent")) {
        return Ok(format!("not run: {}", why.trim()));
    }
    let mut lines = Vec::new();
    for (rs, log) in PGBENCH_CASES {
        lines.push(check_pgbench_case(dir, &format!("{rs}-{log}"))?);
    }
    for rs in ["8k", "128k"] {
        lines.push(check_slog_prediction(dir, rs)?);
    }
    Ok(lines.join("; "))
}

/// `zprof compare`'s SLOG check of recordsize `rs` (see [`check_pgbench`]).
/// Where the commits miss and the run with the log vdev's gap between
/// commits fell outside the model's range (A's gap scaled least, and whole;
/// in 6 pairs run here it kept 0.58-0.84 of it), its writers took a
/// different time between commits for reasons no log device has (the host
/// gave them more or less CPU): the rate cannot be checked on this host, and
/// the ledger says so with the commit's and the gap's times.
fn check_slog_prediction(dir: &Path, rs: &str) -> anyhow::Result<String> {
    let compare = read_json(&dir.join(format!("{rs}-compare.json")))?;
    let check = &compare["slog_check"];
    let numbers = |name: &str| -> Vec<f64> {
        check[name]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
            .unwrap_or_default()
    };
    let triple = |name: &str| -> anyhow::Result<[f64; 3]> {
        numbers(name)
            .try_into()
            .map_err(|_| anyhow!("recordsize {rs}: compare has no SLOG check of {name}: {check}"))
    };
    let [_, predicted, measured] = triple("commits")?;
    let [writes_a, writes_predicted, writes_b] = triple("sync_writes")?;
    let [_, commit_predicted, commit_b] = triple("commit_ns")?;
    let [gap_a, _, gap_b] = triple("gap_ns")?;
    let [least, most]: [f64; 2] = numbers("gap_range_ns")
        .try_into()
        .map_err(|_| anyhow!("recordsize {rs}: compare has no gap range: {check}"))?;
    let serial = check["serial"].as_bool().unwrap_or(false);
    let words = format!(
        "recordsize {rs}: the SLOG what-if on the log vdev as measured (write {:.0} us, flush {:.0} us; commits one at a time: {serial}) predicted {predicted:.0} commits/s, the run with it made {measured:.0}/s (sync writes {writes_a:.0}/s without, {writes_predicted:.0} predicted, {writes_b:.0} made); a commit {:.2} ms predicted, {:.2} ms made; the gap between commits {:.2} ms without, {:.2} ms with (the model's range {:.2}-{:.2} ms)",
        check["device_write_ns"].as_f64().unwrap_or(0.0) / 1e3,
        check["device_flush_ns"].as_f64().unwrap_or(0.0) / 1e3,
        commit_predicted / 1e6,
        commit_b / 1e6,
        gap_a / 1e6,
        gap_b / 1e6,
        least / 1e6,
        most / 1e6,
    );
    match slog_verdict((predicted, measured), gap_b, (least, most)) {
        SlogVerdict::Close => return Ok(words),
        SlogVerdict::Misses => bail!("{words}"),
        SlogVerdict::CannotCheck => {}
    }
    let why = format!(
        "{words}: the writers' gap between commits with the log vdev is outside the model's range, which no log device explains (the host gave them more or less CPU)"
    );
    crate::ledger::record("guest", &ledger_case(dir, rs), "cannot-check", &why);
    Ok(format!("{why} (cannot be checked on this host)"))
}

/// How the SLOG what-if's commits per second came out against the run with
/// the log vdev.
#[derive(Debug, PartialEq)]
enum SlogVerdict {
    /// Within [`SLOG_SHARE`].
    Close,
    /// Off by more, though the gap between commits with the log vdev was in
    /// the model's range.
    Misses,
    /// Off by more, and the gap was outside it.
    CannotCheck,
}

/// The verdict on commits per second (predicted, measured), the gap between
/// commits with the log vdev and the model's range for it.
fn slog_verdict(
    (predicted, measured): (f64, f64),
    gap: f64,
    (least, most): (f64, f64),
) -> SlogVerdict {
    if (predicted / measured - 1.0).abs() <= SLOG_SHARE {
        SlogVerdict::Close
    } else if gap < least || gap > most {
        SlogVerdict::CannotCheck
    } else {
        SlogVerdict::Misses
    }
}

/// The ledger's name of the SLOG check of recordsize `rs` in `dir`
/// (…/CELL/test-VARIANT/results/pgbench).
fn ledger_case(dir: &Path, rs: &str) -> String {
    let parts: Vec<String> = dir
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let cell = parts.len().checked_sub(4).map_or("", |i| parts[i].as_str());
    let variant = parts.len().checked_sub(3).map_or("", |i| parts[i].as_str());
    format!("{cell} {variant} pgbench {rs} SLOG what-if")
}

/// One case: its fsyncs against PostgreSQL's count (the server's start and
/// stop, measured alone in the first case, taken off both), its tps.
fn check_pgbench_case(dir: &Path, case: &str) -> anyhow::Result<String> {
    let (idle_fsyncs, idle_expected, _) = counted_in(dir, "8k-nolog", "idle")?;
    let (fsyncs, expected, tps) = counted_in(dir, case, "bench")?;
    let (ours, theirs) = (
        fsyncs.saturating_sub(idle_fsyncs),
        expected.saturating_sub(idle_expected),
    );
    ensure!(
        theirs > 0 && (ours as f64 / theirs as f64 - 1.0).abs() <= FSYNC_SHARE,
        "{case}: zprof counted {ours} fsyncs from the server ({fsyncs} less {idle_fsyncs} at its start and stop), PostgreSQL {theirs} (WAL syncs and checkpoint files, {expected} less {idle_expected})"
    );
    let printed = std::fs::read_to_string(dir.join(format!("{case}-bench-report.txt")))?;
    let pgbench_tps = printed
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .ok_or_else(|| anyhow!("{case}: pgbench printed no tps"))?;
    ensure!(
        tps == pgbench_tps,
        "{case}: the recording's benchmark has {tps} tps, pgbench printed {pgbench_tps}"
    );
    Ok(format!(
        "{case}: {ours} fsyncs = PostgreSQL's {theirs}, {tps:.1} tps"
    ))
}

/// One run of a case: the fsyncs zprof counted from the server's processes,
/// PostgreSQL's count (WAL syncs and the files its checkpoints synced), and
/// the benchmark's tps.
fn counted_in(dir: &Path, case: &str, run: &str) -> anyhow::Result<(u64, u64, f64)> {
    let rec = read_json(&dir.join(format!("{case}-{run}.json")))?;
    let fsyncs: u64 = rec["requests"]
        .as_array()
        .ok_or_else(|| anyhow!("{case}-{run}: no request rows"))?
        .iter()
        .filter(|r| r["op"] == "fsync" && r["comm"] == "postgres")
        .map(|r| r["count"].as_u64().unwrap_or(0))
        .sum();
    let wal: u64 = std::fs::read_to_string(dir.join(format!("{case}-{run}-wal-sync.txt")))?
        .trim()
        .parse()?;
    let log = std::fs::read_to_string(dir.join(format!("{case}-{run}-server.log")))?;
    let files: u64 = log
        .lines()
        .filter_map(|l| l.split("sync files=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.trim().parse::<u64>().ok())
        .sum();
    let tps = rec["benchmark"]["jobs"][0]["transactions"]["tps"]
        .as_f64()
        .unwrap_or(0.0);
    Ok((fsyncs, wal + files, tps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slog_miss_fails_unless_the_gap_between_commits_left_the_models_range() {
        // A 6.17-2.4.4 guest's pgbench 8k pair: 123 commits/s predicted, 140
        // made; the gap 6.52 ms without the log vdev (the model's range
        // 3.59-6.52 ms), 3.99 ms with it.
        let range = (3.59, 6.52);
        let cases = [
            ((123.0, 140.0), 3.99, SlogVerdict::Close),
            // The same gaps with a prediction off by half: the model's fault.
            ((210.0, 140.0), 3.99, SlogVerdict::Misses),
            // A gap longer than the whole, or shorter than the least: the
            // writers', not the device's.
            ((210.0, 140.0), 7.4, SlogVerdict::CannotCheck),
            ((70.0, 140.0), 2.1, SlogVerdict::CannotCheck),
        ];
        for (commits, gap, verdict) in cases {
            assert_eq!(
                slog_verdict(commits, gap, range),
                verdict,
                "{commits:?} {gap}"
            );
        }
    }

    /// A guest run's results, where ZPROF_GUEST_RESULTS names them (the
    /// directory `guest run -- zfs-kernel-test.sh --only=benchmarks` fills).
    #[test]
    #[ignore = "needs a guest run's results"]
    fn a_guest_runs_benchmarks_pass() {
        let dir = std::path::PathBuf::from(std::env::var("ZPROF_GUEST_RESULTS").unwrap());
        type Check = fn(&Path) -> anyhow::Result<String>;
        let checks: [(&str, Check); 3] = [
            ("recv", check_recv),
            ("zvol-stream", check_zvol_stream),
            ("pgbench", check_pgbench),
        ];
        for (section, check) in checks {
            if dir.join(section).exists() {
                eprintln!("{section}: {}", check(&dir.join(section)).unwrap());
            }
        }
    }
}

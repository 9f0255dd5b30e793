//! `zprof serve` scraped by a real Prometheus server (Debian's package, which
//! `cargo xtask setup` installs), both on loopback, with a scrape every second,
//! while the lab runs fsync writes and then throttled async writes under
//! `zprof record`:
//! - `promtool check metrics` passes on the exposition, and the OpenMetrics
//!   one parses with the Prometheus Python client's strict parser;
//! - Prometheus's count of zil_commit calls for the lab's pool equals
//!   record's, and the lab's own count within 2;
//! - its p50 (`histogram_quantile`, on the cumulative buckets and on their
//!   rate) is in record's p50's power of two or a neighbour;
//! - monitoring/: the rules pass `promtool check rules` and their unit tests,
//!   each recording rule and each expression of the Grafana dashboard returns
//!   data from this Prometheus;
//! - SIGTERM detaches every probe and exits 0. Needs root.

use std::{
    io::Write as _,
    net::SocketAddr,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

mod common;
use common::serving::{
    Reaper, get, line_with, monitoring, query, query_all, settled, start_prometheus, stop,
};
use common::{lab_releases, require_root, scratch, zprof, zprof_on_lab};

/// The p50 of record's rows of `stage`, in ns (the low edge of its bucket).
fn record_p50_ns(recording: &Value, stage: &str, pool: &str) -> f64 {
    let mut buckets = std::collections::BTreeMap::new();
    for row in recording["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == stage && h["pool"] == pool)
    {
        for pair in row["buckets"].as_array().unwrap() {
            *buckets
                .entry(pair[0].as_u64().unwrap() as usize)
                .or_insert(0u64) += pair[1].as_u64().unwrap();
        }
    }
    let total: u64 = buckets.values().sum();
    let mut seen = 0;
    for (index, n) in buckets {
        seen += n;
        if seen * 2 >= total {
            return zprof_common::hist_bucket_low(index) as f64;
        }
    }
    panic!("record has no {stage} rows for {pool}");
}

#[test]
fn prometheus_scrapes_serve_and_its_figures_agree_with_record_and_the_lab() {
    require_root();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-serve", &release.version);
    let mut serve = zprof()
        .args([
            "serve",
            "--target",
            &format!("libzpool={}", release.libzpool.display()),
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = line_with(&mut serve, "serving http://");
    let exporter: SocketAddr = line
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    let mut reaper = Reaper(vec![serve]);
    let (prometheus, prometheus_address) = start_prometheus(&dir, exporter);
    reaper.0.push(prometheus);

    let recording = dir.join("rec.json");
    // fsync writes, then async writes that a 64 MiB ARC throttles (dmu_tx_wait).
    let jobs = [
        "--arc-max",
        "64m",
        "--job",
        "name=f,rw=randwrite,bs=4k,size=16m,runtime=4,fsync=1",
        "--job",
        "name=w,rw=write,bs=128k,size=1g,runtime=4",
    ];
    let lab = zprof_on_lab("record", &release.lab, &dir, &recording, &jobs);
    let pool = lab["jobs"][0]["pool"]["name"].as_str().unwrap().to_owned();
    let lab_commits = lab["totals"]["zil_commits_all"].as_f64().unwrap();
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let rec_commits: u64 = rec["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == "zil_commit" && h["pool"] == pool.as_str())
        .map(|h| h["count"].as_u64().unwrap())
        .sum();

    let series = format!("zfs_zil_commit_duration_seconds_count{{pool=\"{pool}\"}}");
    let commits = settled(prometheus_address, &series);
    let buckets = format!("zfs_zil_commit_duration_seconds_bucket{{pool=\"{pool}\"}}");
    let p50 = query(
        prometheus_address,
        &format!("histogram_quantile(0.5, {buckets})"),
    )
    .unwrap();
    let p50_of_rate = query(
        prometheus_address,
        &format!("histogram_quantile(0.5, sum by (le) (rate({buckets}[1m])))"),
    )
    .unwrap();
    let record_p50 = record_p50_ns(&rec, "zil_commit", &pool);
    eprintln!(
        "zil_commit on {pool}: Prometheus {commits} calls, p50 {:.0} us (of the rate over 1m: {:.0} us); record {rec_commits} calls, p50 bucket from {:.0} us; the lab {lab_commits} calls",
        p50 * 1e6,
        p50_of_rate * 1e6,
        record_p50 / 1e3
    );
    assert_eq!(
        commits, rec_commits as f64,
        "Prometheus and record count the same calls"
    );
    assert!(
        (commits - lab_commits).abs() <= 2.0,
        "Prometheus {commits} vs the lab's {lab_commits}"
    );
    let power = |ns: f64| ns.log2().floor() as i64;
    for (what, value) in [("cumulative", p50), ("rate", p50_of_rate)] {
        assert!(
            (power(value * 1e9) - power(record_p50)).abs() <= 1,
            "{what} p50 {value} s vs record's {record_p50} ns"
        );
    }

    monitoring_expressions_return_data(prometheus_address);

    let (status, exposition) = get(exporter, "/metrics", None).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let (checked, said) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .output_with_stdin(&exposition);
    assert!(
        checked.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    let (_, openmetrics) = get(
        exporter,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    )
    .unwrap();
    assert!(openmetrics.ends_with("# EOF\n"), "OpenMetrics when asked");
    let (parsed, said) = Command::new("/usr/bin/python3")
        .args(["-c", OPENMETRICS_PARSER])
        .stdin(Stdio::piped())
        .output_with_stdin(&openmetrics);
    assert!(
        parsed.success(),
        "the OpenMetrics parser of python3-prometheus-client: {said}"
    );
    eprintln!(
        "OpenMetrics exposition parsed by python3-prometheus-client: {}",
        said.trim()
    );

    stop(reaper.0.remove(0));
    drop(reaper);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The rules pass promtool's checks and unit tests; each recording rule and
/// each dashboard expression (at a 1m rate interval, every pool) returns
/// data from `prometheus` after the lab's run, but those of the write
/// throttle's tunables: serve exports no libzpool process's globals (it
/// follows every process), and zfs_dirty_data_max has no default to stand
/// in for it (10% of the host's memory).
fn monitoring_expressions_return_data(prometheus: SocketAddr) {
    for args in [
        &["check", "rules", "zprof-rules.yml"][..],
        &["test", "rules", "zprof-rules.test.yml"],
    ] {
        let output = Command::new("promtool")
            .args(args)
            .current_dir(monitoring())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let rules = std::fs::read_to_string(monitoring().join("zprof-rules.yml")).unwrap();
    let records: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .collect();
    assert_eq!(records.len(), 4, "{records:?}");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(monitoring().join("grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut expressions: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_owned())
        })
        .map(|e| e.replace("$__rate_interval", "1m").replace("$pool", ".+"))
        .filter(|e| !e.contains("zfs_dirty_data_max_bytes"))
        .collect();
    assert!(expressions.len() >= 15, "{expressions:?}");
    expressions.extend(records.iter().map(|r| (*r).to_owned()));
    // The recording rules are evaluated every second: give them a few.
    let started = Instant::now();
    let empty = loop {
        let empty: Vec<&String> = expressions
            .iter()
            .filter(|e| !query_all(prometheus, e).iter().any(|v| v.is_finite()))
            .collect();
        if empty.is_empty() || started.elapsed() > Duration::from_secs(10) {
            break empty.into_iter().cloned().collect::<Vec<_>>();
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(empty.is_empty(), "no data (or only NaN) for: {empty:#?}");
    eprintln!(
        "{} dashboard and recording-rule expressions returned data",
        expressions.len()
    );
}

/// The strict OpenMetrics parser of the Prometheus project's Python client
/// (Debian's python3-prometheus-client, which the set-up installs): it
/// refuses a missing `# EOF`, a counter sample without `_total`, buckets out
/// of order, a histogram without its `+Inf` bucket.
const OPENMETRICS_PARSER: &str = "import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse
families = list(parse(sys.stdin.read()))
print(len(families), 'families,', sum(len(f.samples) for f in families), 'samples')";

/// Runs a command with `input` on its stdin: (status, stdout and stderr).
trait OutputWithStdin {
    fn output_with_stdin(&mut self, input: &str) -> (std::process::ExitStatus, String);
}

impl OutputWithStdin for Command {
    fn output_with_stdin(&mut self, input: &str) -> (std::process::ExitStatus, String) {
        let mut child = self
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("no promtool: cargo xtask setup installs prometheus");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            output.status,
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        )
    }
}

/// A port in use is refused with exit 2, before anything is attached.
#[test]
fn a_port_in_use_is_named_and_nothing_is_attached() {
    require_root();
    let release = lab_releases().remove(0);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let output = zprof()
        .args([
            "serve",
            "--target",
            &format!("libzpool={}", release.libzpool.display()),
            "--listen",
            &address.to_string(),
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("cannot listen on {address}")) && !said.contains("attached"),
        "{said}"
    );
}

/// The exposition of a kernel recording (the guest's requests run: zvol and
/// file requests per dataset, which libzpool has not) passes promtool too.
#[test]
fn a_kernel_recordings_exposition_passes_promtool() {
    let path = common::data_dir().join("guest-2.1.11-requests.json");
    let rec: zprof::recording::Recording =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let options = zprof::render::exposition::Options {
        per_vdev: true,
        max_series: 5000,
        openmetrics: false,
    };
    let text = zprof::render::exposition::render(
        &zprof::recording::live::Scrape::of_recording(&rec),
        &options,
    );
    assert!(
        text.contains(
            "zfs_request_duration_seconds_count{layer=\"zvol\",op=\"write\",dataset=\"rq/v1\"}"
        ),
        "{text}"
    );
    let (checked, said) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .output_with_stdin(&text);
    assert!(
        checked.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    let openmetrics = zprof::render::exposition::render(
        &zprof::recording::live::Scrape::of_recording(&rec),
        &zprof::render::exposition::Options {
            openmetrics: true,
            ..options
        },
    );
    let (parsed, said) = Command::new("/usr/bin/python3")
        .args(["-c", OPENMETRICS_PARSER])
        .stdin(Stdio::piped())
        .output_with_stdin(&openmetrics);
    assert!(
        parsed.success(),
        "the OpenMetrics parser of python3-prometheus-client: {said}"
    );
    let (_, said) = Command::new("/usr/bin/python3")
        .args(["-c", OPENMETRICS_PARSER])
        .stdin(Stdio::piped())
        .output_with_stdin(openmetrics.trim_end_matches("# EOF\n"));
    assert!(
        said.contains("EOF"),
        "the parser can fail: without # EOF it says {said}"
    );
}

/// One leaf's place: (top-level vdev, allocation class).
type Place = (String, String);

/// Every leaf vdev row is labelled with its top-level vdev and allocation
/// class as the pool itself has them (the lab reads them from its vdev tree:
/// a mirror, a special vdev, a log vdev and a cache device), in serve's
/// exposition (`--per-vdev`) and in record's recording, on each release; and
/// once the pool is exported serve forgets its series (`--forget-after`).
#[test]
fn leaf_rows_carry_their_top_level_vdev_and_class_and_gone_pools_are_forgotten_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = scratch("zprof-serve-vdevs", &release.version);
        let target = format!("libzpool={}", release.libzpool.display());
        let mut serve = zprof()
            .args([
                "serve",
                "--per-vdev",
                "--forget-after",
                "2s",
                "--target",
                &target,
                "--listen",
                "127.0.0.1:0",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let line = line_with(&mut serve, "serving http://");
        let exporter: SocketAddr = line
            .rsplit("http://")
            .next()
            .unwrap()
            .trim_end_matches("/metrics")
            .parse()
            .unwrap();
        let reaper = Reaper(vec![serve]);
        // Scraped every 300 ms while the lab runs: the pool's rows end soon
        // after it is exported.
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let scraper = {
            let running = running.clone();
            std::thread::spawn(move || {
                let mut scrapes = Vec::new();
                while running.load(std::sync::atomic::Ordering::Relaxed) {
                    scrapes.push(get(exporter, "/metrics", None).unwrap().1);
                    std::thread::sleep(Duration::from_millis(300));
                }
                scrapes
            })
        };
        let recording = dir.join("rec.json");
        let layout = [
            "--layout",
            "mirror:2",
            "--logs",
            "1",
            "--specials",
            "1",
            "--caches",
            "1",
            "--arc-max",
            "64m",
        ];
        let job = ["--job", "name=m,rw=randrw,bs=8k,size=32m,runtime=3,fsync=4"];
        let lab = zprof_on_lab(
            "record",
            &release.lab,
            &dir,
            &recording,
            &[&layout[..], &job[..]].concat(),
        );
        running.store(false, std::sync::atomic::Ordering::Relaxed);
        let scrapes = scraper.join().unwrap();
        let pool = lab["jobs"][0]["pool"]["name"].as_str().unwrap().to_owned();
        let truth: std::collections::BTreeMap<u64, Place> = lab["jobs"][0]["leaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["guid"].as_u64().unwrap(),
                    (
                        l["top_vdev"].as_str().unwrap().to_owned(),
                        l["vdev_class"].as_str().unwrap().to_owned(),
                    ),
                )
            })
            .collect();
        let classes: std::collections::BTreeSet<&str> =
            truth.values().map(|(_, class)| class.as_str()).collect();
        assert_eq!(
            classes.into_iter().collect::<Vec<_>>(),
            ["cache", "log", "normal", "special"],
            "the lab's leaves: {truth:?}"
        );

        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        let recorded: std::collections::BTreeMap<u64, Place> = rec["vdevs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["pool"] == pool.as_str())
            .map(|v| {
                (
                    v["guid"].as_u64().unwrap(),
                    (
                        v["top_vdev"].as_str().unwrap().to_owned(),
                        v["class"].as_str().unwrap().to_owned(),
                    ),
                )
            })
            .collect();
        assert_eq!(
            recorded, truth,
            "record's leaves of {pool} (OpenZFS {})",
            release.version
        );

        // The last scrape with the pool's leaves: they had all done I/O by then.
        let last = scrapes
            .iter()
            .rev()
            .find(|s| !exported_places(s, &pool).is_empty())
            .expect("no scrape with the pool's leaves");
        let exported = exported_places(last, &pool);
        eprintln!(
            "OpenZFS {}: {pool}'s leaves as exported: {exported:?}",
            release.version
        );
        assert_eq!(
            exported, truth,
            "serve's leaves of {pool} (OpenZFS {})",
            release.version
        );

        let started = Instant::now();
        let forgotten = loop {
            let (_, text) = get(exporter, "/metrics", None).unwrap();
            if !text.contains(&format!("pool=\"{pool}\"")) {
                break text;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{pool}'s series still exported 20 s after the lab ended"
            );
            std::thread::sleep(Duration::from_millis(500));
        };
        let count = forgotten
            .lines()
            .find_map(|l| l.strip_prefix("zprof_pools_forgotten_total "))
            .unwrap();
        assert!(
            count.parse::<u64>().unwrap() >= 1,
            "the pool was forgotten, but zprof_pools_forgotten_total is {count}"
        );
        eprintln!(
            "{pool}'s series ended {:.1} s after the lab's run (--forget-after 2s)",
            started.elapsed().as_secs_f64()
        );
        drop(reaper);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The leaves of `pool` in an exposition's vdev_total series: guid -> place
/// (a leaf in two places would be a wrong label, and fails here).
fn exported_places(exposition: &str, pool: &str) -> std::collections::BTreeMap<u64, Place> {
    let label = |line: &str, name: &str| {
        let start = line.find(&format!("{name}=\""))? + name.len() + 2;
        Some(line[start..start + line[start..].find('"')?].to_owned())
    };
    let mut places = std::collections::BTreeMap::new();
    for line in exposition.lines().filter(|l| {
        l.starts_with("zfs_vdev_total_duration_seconds_count{")
            && l.contains(&format!("pool=\"{pool}\""))
    }) {
        let guid: u64 = label(line, "vdev_guid")
            .unwrap_or_else(|| panic!("no vdev_guid: {line}"))
            .parse()
            .unwrap();
        let place = (
            label(line, "top_vdev").unwrap_or_else(|| panic!("no top_vdev: {line}")),
            label(line, "vdev_class").unwrap_or_else(|| panic!("no vdev_class: {line}")),
        );
        let known = places.entry(guid).or_insert_with(|| place.clone());
        assert_eq!(*known, place, "leaf {guid} in two places: {line}");
    }
    places
}

//! A benchmark's own result as a recording keeps it, and reading fio's and
//! zprof-lab's JSON from what they printed, so `zprof run` can show it beside
//! the stage breakdown and `explain` can check its findings against the
//! benchmark's numbers (pgbench's text: [`super::pgbench`]; which reader
//! applies, and a command's wall time: [`super::result`]).
//!
//! Both formats are read leniently: a missing field is absent, not an error,
//! because fio's JSON varies between versions and options (`json+`, `--group_reporting`).
//! Text before the JSON document (fio prints job description lines for some job
//! files) is skipped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::units::{format_bytes, format_count, format_ns};

/// A benchmark's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Benchmark {
    /// "fio" or "zprof-lab".
    pub tool: String,
    /// The tool's version string.
    pub version: String,
    /// One entry per job.
    pub jobs: Vec<BenchJob>,
    /// Pools the benchmark built (zprof-lab only): layout facts a finding can use.
    #[serde(default)]
    pub pools: Vec<BenchPool>,
    /// Clients the benchmark ran (pgbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// The command's wall time, seconds (a command zprof does not read the
    /// output of: its result is how long it took).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
}

/// A pool described by zprof-lab.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchPool {
    /// Pool name.
    pub name: String,
    /// Layout, e.g. "raidz3:8x1".
    pub layout: String,
    /// ashift.
    pub ashift: u32,
    /// Block size of the data objects (volblocksize).
    pub volblocksize: u64,
}

/// One job's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchJob {
    /// Job name.
    pub name: String,
    /// Reads, when the job read.
    pub read: Option<BenchOps>,
    /// Writes, when the job wrote.
    pub write: Option<BenchOps>,
    /// fsync/fdatasync calls (fio's "sync"), or ZIL commits (the lab).
    pub sync: Option<BenchSync>,
    /// The pool the job ran on, when the benchmark says (zprof-lab).
    #[serde(default)]
    pub pool: Option<String>,
    /// When its measured part ran, ms since the Unix epoch, start and end
    /// (zprof-lab: after its layout writes and warm-up reads, to the end of
    /// its job-end sync): what tells a recording's phases apart.
    #[serde(default)]
    pub window_unix_ms: Option<[u64; 2]>,
    /// Transactions (pgbench: the run's, or one script's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<BenchTransactions>,
}

/// A database benchmark's transactions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchTransactions {
    /// Transactions processed.
    pub count: u64,
    /// Those that failed.
    pub failed: u64,
    /// Transactions per second (pgbench's, without the connection time).
    pub tps: f64,
    /// Mean latency, ns.
    pub lat_mean_ns: Option<f64>,
    /// Latency's standard deviation, ns (printed with -r, -l or --progress).
    pub lat_stddev_ns: Option<f64>,
}

/// Throughput and latency of one direction of a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchOps {
    /// Operations completed.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Operations per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Mean latency, ns.
    pub lat_mean_ns: f64,
    /// Median completion latency, ns (when reported).
    pub p50_ns: Option<u64>,
    /// 99th percentile, ns (when reported).
    pub p99_ns: Option<u64>,
}

/// Sync calls made by the job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchSync {
    /// Calls.
    pub count: u64,
    /// Mean latency, ns (fio only).
    pub lat_mean_ns: Option<f64>,
    /// Median, ns (fio only).
    pub p50_ns: Option<u64>,
}

/// Finds the first JSON object in `text` that starts a line.
fn first_json_object(text: &str) -> Option<Value> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with('{') {
            let mut stream =
                serde_json::Deserializer::from_str(&text[offset..]).into_iter::<Value>();
            if let Some(Ok(value)) = stream.next() {
                return Some(value);
            }
        }
        offset += line.len();
    }
    None
}

fn percentile(value: &Value, key: &str) -> Option<u64> {
    value.get("percentile")?.get(key)?.as_u64()
}

/// One direction of a job; `percentiles` names the object holding them (fio
/// reports completion-latency percentiles under clat_ns, the lab under lat_ns).
fn ops(direction: &Value, percentiles: &str) -> Option<BenchOps> {
    let ops = direction.get("total_ios")?.as_u64()?;
    if ops == 0 {
        return None;
    }
    let pct = direction.get(percentiles);
    Some(BenchOps {
        ops,
        bytes: direction
            .get("io_bytes")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        iops: direction.get("iops").and_then(Value::as_f64).unwrap_or(0.0),
        bw_bytes: direction
            .get("bw_bytes")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        lat_mean_ns: direction
            .get("lat_ns")
            .and_then(|l| l.get("mean"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        p50_ns: pct.and_then(|c| percentile(c, "50.000000")),
        p99_ns: pct.and_then(|c| percentile(c, "99.000000")),
    })
}

fn fio_ops(direction: &Value) -> Option<BenchOps> {
    ops(direction, "clat_ns")
}

fn parse_fio(doc: &Value) -> Option<Benchmark> {
    let version = doc.get("fio version")?.as_str()?.to_owned();
    let jobs = doc
        .get("jobs")?
        .as_array()?
        .iter()
        .map(|job| BenchJob {
            name: job
                .get("jobname")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            read: job.get("read").and_then(fio_ops),
            write: job.get("write").and_then(fio_ops),
            sync: job.get("sync").and_then(|s| {
                let count = s.get("total_ios")?.as_u64()?;
                (count > 0).then(|| BenchSync {
                    count,
                    lat_mean_ns: s
                        .get("lat_ns")
                        .and_then(|l| l.get("mean"))
                        .and_then(Value::as_f64),
                    p50_ns: s.get("lat_ns").and_then(|l| percentile(l, "50.000000")),
                })
            }),
            pool: None,
            window_unix_ms: fio_window(job),
            transactions: None,
        })
        .collect();
    Some(Benchmark {
        tool: "fio".into(),
        version,
        jobs,
        pools: Vec::new(),
        clients: None,
        wall_s: None,
    })
}

fn lab_ops(direction: &Value) -> Option<BenchOps> {
    ops(direction, "lat_ns")
}

fn parse_lab(doc: &Value) -> Option<Benchmark> {
    let version = doc.get("zprof_lab_version")?.as_str()?.to_owned();
    let jobs = doc
        .get("jobs")?
        .as_array()?
        .iter()
        .map(|job| BenchJob {
            name: job
                .get("jobname")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            read: job.get("read").and_then(lab_ops),
            write: job.get("write").and_then(lab_ops),
            sync: job
                .get("zil_commits")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .map(|count| BenchSync {
                    count,
                    lat_mean_ns: None,
                    p50_ns: None,
                }),
            // The lab's job "pool" is the pool's account, named inside.
            pool: job
                .get("pool")
                .and_then(|p| p.as_str().or_else(|| p.get("name").and_then(Value::as_str)))
                .map(str::to_owned),
            window_unix_ms: lab_window(job),
            transactions: None,
        })
        .collect();
    let pools = doc
        .get("pools")
        .and_then(Value::as_array)
        .map(|pools| {
            pools
                .iter()
                .map(|p| BenchPool {
                    name: p
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    layout: p
                        .get("layout_text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    ashift: p.get("ashift").and_then(Value::as_u64).unwrap_or(0) as u32,
                    volblocksize: p.get("volblocksize").and_then(Value::as_u64).unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Benchmark {
        tool: "zprof-lab".into(),
        version,
        jobs,
        pools,
        clients: None,
        wall_s: None,
    })
}

/// A fio job's window, where its fio prints when the job started
/// (`job_start`, ms since the epoch; fio 3.33 does not) and `job_runtime` (ms).
fn fio_window(job: &Value) -> Option<[u64; 2]> {
    let start = job
        .get("job_start")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0)?;
    let run_ms = job.get("job_runtime").and_then(Value::as_u64)?;
    Some([start, start + run_ms])
}

/// A lab job's measured window: from its start through its run and its
/// job-end sync (absent in reports of older labs).
fn lab_window(job: &Value) -> Option<[u64; 2]> {
    let start = job
        .get("started_unix_ms")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0)?;
    let run_ms = job.get("runtime_ms").and_then(Value::as_u64).unwrap_or(0) as f64;
    let sync_ms = job.get("sync_ms").and_then(Value::as_f64).unwrap_or(0.0);
    Some([start, start + (run_ms + sync_ms).ceil() as u64])
}

/// Parses fio or zprof-lab JSON output, if `text` holds one.
pub fn parse_json(text: &str) -> Option<Benchmark> {
    let doc = first_json_object(text)?;
    parse_fio(&doc).or_else(|| parse_lab(&doc))
}

/// One line per job, for reports (a command's wall time first).
pub fn describe(bench: &Benchmark) -> Vec<String> {
    let heading = bench.wall_s.map(|wall| {
        format!(
            "command {}: {:.2} s wall time; what zprof measured it move (mean IOPS and bandwidth over that time):",
            bench.version, wall
        )
    });
    let clients = bench
        .clients
        .map(|c| format!("; {c} clients"))
        .unwrap_or_default();
    heading
        .into_iter()
        .chain(bench.jobs.iter().map(|job| job_line(bench, job, &clients)))
        .collect()
}

fn job_line(bench: &Benchmark, job: &BenchJob, clients: &str) -> String {
    let fmt_ns = |ns: Option<u64>| ns.map(format_ns).unwrap_or_else(|| "-".into());
    let mut parts = Vec::new();
    if let Some(t) = &job.transactions {
        let ms = |ns: Option<f64>| fmt_ns(ns.map(|ns| ns as u64));
        parts.push(format!(
            "{:.1} tps, {} transactions ({} failed), latency average {}, stddev {}{clients}",
            t.tps,
            format_count(t.count as f64),
            t.failed,
            ms(t.lat_mean_ns),
            ms(t.lat_stddev_ns)
        ));
    }
    for (label, ops) in [("write", &job.write), ("read", &job.read)] {
        if let Some(o) = ops {
            parts.push(format!(
                "{label} {} IOPS, {}/s, p50 {}, p99 {}",
                format_count(o.iops),
                format_bytes(o.bw_bytes),
                fmt_ns(o.p50_ns),
                fmt_ns(o.p99_ns)
            ));
        }
    }
    if let Some(s) = &job.sync {
        let what = if bench.tool == "fio" {
            "fsyncs"
        } else {
            "zil commits"
        };
        match s.p50_ns {
            Some(p50) => parts.push(format!("{} {what} (p50 {})", s.count, format_ns(p50))),
            None => parts.push(format!("{} {what}", s.count)),
        }
    }
    format!("{} job {}: {}", bench.tool, job.name, parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO_FSYNC: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/fio-3.33-randwrite-fsync1.json"
    ));
    const FIO_TWO_JOBS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/fio-3.33-seqwrite-randread.json"
    ));

    #[test]
    fn fio_fsync_job() {
        let bench = parse_json(FIO_FSYNC).unwrap();
        assert_eq!(bench.tool, "fio");
        assert_eq!(bench.version, "fio-3.33");
        let job = &bench.jobs[0];
        assert_eq!(job.name, "randwrite-fsync");
        let write = job.write.as_ref().unwrap();
        assert_eq!(write.ops, 1016);
        assert_eq!(write.bytes, 1016 * 4096);
        assert!((write.iops - 507.49).abs() < 0.01);
        assert!(job.read.is_none(), "the job did not read");
        // fsync=1: one fsync per write.
        assert_eq!(job.sync.as_ref().unwrap().count, 1016);
        assert!(job.sync.as_ref().unwrap().p50_ns.unwrap() > 0);
    }

    #[test]
    fn fio_two_jobs_after_text() {
        // Real fio printed a job description line before the JSON document.
        assert!(!FIO_TWO_JOBS.starts_with('{'));
        let bench = parse_json(FIO_TWO_JOBS).unwrap();
        assert_eq!(bench.jobs.len(), 2);
        assert!(bench.jobs[0].write.is_some() && bench.jobs[0].read.is_none());
        assert!(bench.jobs[1].read.is_some() && bench.jobs[1].write.is_none());
        assert!(bench.jobs[1].read.as_ref().unwrap().p99_ns.is_some());
        assert_eq!(describe(&bench).len(), 2);
    }

    #[test]
    fn other_output_is_not_a_benchmark() {
        assert!(parse_json("hello\nworld\n").is_none());
        assert!(parse_json("{\"jobs\": 3}").is_none());
        assert!(parse_json("{ truncated").is_none());
    }
}

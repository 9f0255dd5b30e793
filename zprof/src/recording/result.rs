//! A command's result as `zprof run` keeps it: the benchmark's own (fio's
//! or zprof-lab's JSON, pgbench's report), or for any other command its
//! wall time with what zprof saw it move over that time.

use super::{
    Recording,
    benchmark::{self, BenchJob, BenchOps, Benchmark},
    pgbench,
};

/// The benchmark's own result in `text`, if it printed one zprof reads.
pub fn parse(text: &str) -> Option<Benchmark> {
    pgbench::parse(text).or_else(|| benchmark::parse_json(text))
}

/// The result of a command zprof does not read the output of: its
/// program's name and how long it ran, with what zprof measured it move
/// over that time as its jobs: the streams `zfs recv` read, per pool; per
/// dataset or zvol the requests (kernel), else per pool the workload's DMU
/// reads and writes.
pub fn command_result(command: &[String], wall_s: f64, measured: &Recording) -> Benchmark {
    let program = command
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
        .unwrap_or_default();
    Benchmark {
        tool: "command".into(),
        version: program,
        jobs: measured_jobs(measured, wall_s),
        pools: Vec::new(),
        clients: None,
        wall_s: Some(wall_s),
    }
}

/// Reads and writes per dataset or zvol (requests), or per pool (the
/// workload rows), as jobs over `wall_s`.
fn measured_jobs(rec: &Recording, wall_s: f64) -> Vec<BenchJob> {
    use std::collections::BTreeMap;
    let mut moved: BTreeMap<String, [(u64, u64, u64); 2]> = BTreeMap::new();
    let mut add = |name: String, write: bool, count: u64, bytes: u64, ns: u64| {
        let entry = &mut moved.entry(name).or_default()[usize::from(write)];
        *entry = (entry.0 + count, entry.1 + bytes, entry.2 + ns);
    };
    // zfs recv writes from inside its ioctl: the stream it read is its write.
    for h in rec.histograms.iter().filter(|h| h.stage == "recv") {
        let name = format!("recv into pool {}", h.pool);
        add(name, true, h.count, h.bytes, h.total_ns);
    }
    if rec
        .requests
        .iter()
        .any(|r| r.op == "read" || r.op == "write")
    {
        for r in rec
            .requests
            .iter()
            .filter(|r| r.op == "read" || r.op == "write")
        {
            let name = format!("{} {}", r.layer, r.dataset);
            add(name, r.op == "write", r.count, r.bytes, r.total_ns);
        }
    } else {
        for (stage, write) in [("write", true), ("read", false)] {
            for h in rec.histograms.iter().filter(|h| h.stage == stage) {
                add(
                    format!("pool {}", h.pool),
                    write,
                    h.count,
                    h.bytes,
                    h.total_ns,
                );
            }
        }
    }
    let ops = |(count, bytes, ns): (u64, u64, u64)| {
        (count > 0).then(|| BenchOps {
            ops: count,
            bytes,
            iops: count as f64 / wall_s.max(1e-9),
            bw_bytes: bytes as f64 / wall_s.max(1e-9),
            lat_mean_ns: ns as f64 / count as f64,
            p50_ns: None,
            p99_ns: None,
        })
    };
    moved
        .into_iter()
        .map(|(name, [read, write])| BenchJob {
            name,
            read: ops(read),
            write: ops(write),
            sync: None,
            pool: None,
            window_unix_ms: None,
            transactions: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::benchmark::describe;

    fn captured(file: &str) -> Recording {
        let path = format!("{}/../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        Recording::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap()
    }

    /// A command's result: its wall time, and per dataset or zvol what the
    /// request rows of a real guest recording moved; per pool the workload
    /// rows where there are no requests (libzpool).
    #[test]
    fn a_commands_result_is_its_wall_time_and_what_zprof_saw_it_move() {
        let rec = captured("guest-2.1.11-requests.json");
        let bench = command_result(&["/usr/sbin/zfs".into(), "recv".into()], 10.0, &rec);
        assert_eq!(
            (bench.tool.as_str(), bench.version.as_str()),
            ("command", "zfs")
        );
        assert_eq!(bench.wall_s, Some(10.0));
        let written: u64 = rec
            .requests
            .iter()
            .filter(|r| r.op == "write")
            .map(|r| r.bytes)
            .sum();
        let jobs_written: u64 = bench
            .jobs
            .iter()
            .filter_map(|j| j.write.as_ref())
            .map(|w| w.bytes)
            .sum();
        assert!(written > 0);
        assert_eq!(jobs_written, written);
        let lines = describe(&bench);
        assert!(
            lines[0].starts_with("command zfs: 10.00 s wall time"),
            "{lines:?}"
        );
        assert_eq!(lines.len(), bench.jobs.len() + 1);

        let lab = captured("lab-2.1.11-sync-reads.json");
        let bench = command_result(&["zprof-lab".into()], lab.duration_s, &lab);
        let writes: u64 = lab
            .histograms
            .iter()
            .filter(|h| h.stage == "write")
            .map(|h| h.bytes)
            .sum();
        assert_eq!(bench.jobs.len(), 1, "{:?}", bench.jobs);
        assert!(bench.jobs[0].name.starts_with("pool zlab-"));
        assert_eq!(bench.jobs[0].write.as_ref().unwrap().bytes, writes);
    }
}

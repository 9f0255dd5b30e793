//! What pgbench (PostgreSQL's benchmark) prints at the end of a run, read
//! into a [`Benchmark`]: the clients, the transactions processed and failed,
//! tps (without the initial connection time), the latency average and
//! stddev, as a job named by its transaction type; with several scripts
//! (`-b`, `-f`), then the same per script, a job each. Lines it does not know are skipped,
//! so options that add lines (`-r`'s statement latencies, `--progress`)
//! change nothing. Checked against pgbench 15's output (tests/data).

use super::benchmark::{BenchJob, BenchTransactions, Benchmark};

/// Parses pgbench's report, if `text` holds one.
pub fn parse(text: &str) -> Option<Benchmark> {
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("pgbench ("))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())?;
    let mut run = Section::default();
    let mut scripts: Vec<Section> = Vec::new();
    let mut clients = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("SQL script ") {
            let name = name.split_once(": ").map_or(name, |(_, n)| n);
            scripts.push(Section::named(name));
            continue;
        }
        if let Some(n) = value(line, "number of clients: ") {
            clients = n.parse().ok();
            continue;
        }
        // A script's lines start " - "; the run's do not.
        match (line.strip_prefix(" - "), scripts.last_mut()) {
            (Some(rest), Some(script)) => script.read(rest),
            _ => run.read(line),
        }
    }
    // The run first (its tps is pgbench's headline), then each script.
    let jobs = std::iter::once(run.job())
        .chain(scripts.iter().map(Section::job))
        .collect::<Option<Vec<_>>>()?;
    Some(Benchmark {
        tool: "pgbench".into(),
        version,
        jobs,
        pools: Vec::new(),
        clients,
        wall_s: None,
    })
}

/// The figures of the run or of one script.
#[derive(Default)]
struct Section {
    name: String,
    count: Option<u64>,
    failed: u64,
    tps: Option<f64>,
    lat_mean_ms: Option<f64>,
    lat_stddev_ms: Option<f64>,
}

impl Section {
    fn named(name: &str) -> Section {
        Section {
            name: name.trim().to_owned(),
            ..Section::default()
        }
    }

    /// Reads one line of the section.
    fn read(&mut self, line: &str) {
        if let Some(kind) = value(line, "transaction type: ") {
            self.name = kind.to_owned();
        } else if let Some(n) = value(line, "number of transactions actually processed: ") {
            self.count = first_number(n);
        } else if let Some(n) = value(line, "number of failed transactions: ") {
            self.failed = first_number(n).unwrap_or(0);
        } else if let Some(ms) = value(line, "latency average = ") {
            self.lat_mean_ms = first_float(ms);
        } else if let Some(ms) = value(line, "latency stddev = ") {
            self.lat_stddev_ms = first_float(ms);
        } else if let Some(tps) = value(line, "tps = ") {
            self.tps = first_float(tps);
        } else if let Some(rest) = line.trim().split_once(" transactions (") {
            // A script's " - N transactions (P% of total, tps = T)".
            self.count = rest.0.trim().parse().ok();
            self.tps = rest
                .1
                .split_once("tps = ")
                .and_then(|(_, t)| first_float(t));
        }
    }

    fn job(&self) -> Option<BenchJob> {
        let ns = |ms: Option<f64>| ms.map(|ms| ms * 1e6);
        Some(BenchJob {
            name: self.name.clone(),
            read: None,
            write: None,
            sync: None,
            pool: None,
            window_unix_ms: None,
            transactions: Some(BenchTransactions {
                count: self.count?,
                failed: self.failed,
                tps: self.tps?,
                lat_mean_ns: ns(self.lat_mean_ms),
                lat_stddev_ns: ns(self.lat_stddev_ms),
            }),
        })
    }
}

/// The text after `prefix` on `line` (leading spaces ignored).
fn value<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.trim_start().strip_prefix(prefix)
}

/// The first number of `text` when it is a measurement: finite, not
/// negative ("inf" or "1e999" is no tps).
fn first_float(text: &str) -> Option<f64> {
    first_number::<f64>(text).filter(|x| x.is_finite() && *x >= 0.0)
}

/// The first number of `text` ("1.617 ms", "12 (0.000%)").
fn first_number<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.split(|c: char| c.is_whitespace() || c == ')' || c == ',')
        .find(|w| !w.is_empty())?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(file: &str) -> String {
        let path = format!("{}/../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(path).unwrap()
    }

    fn transactions(job: &BenchJob) -> &BenchTransactions {
        job.transactions.as_ref().unwrap()
    }

    #[test]
    fn a_tpcb_run_is_its_transactions_tps_and_latency() {
        let bench = parse(&captured("pgbench-15-tpcb.txt")).unwrap();
        assert_eq!(
            (bench.tool.as_str(), bench.version.as_str()),
            ("pgbench", "15.18")
        );
        assert_eq!(bench.clients, Some(4));
        assert_eq!(bench.jobs.len(), 1);
        assert_eq!(bench.jobs[0].name, "<builtin: TPC-B (sort of)>");
        let t = transactions(&bench.jobs[0]);
        assert_eq!((t.count, t.failed), (21713, 0));
        assert!((t.tps - 4337.927185).abs() < 1e-6);
        assert!((t.lat_mean_ns.unwrap() - 922_000.0).abs() < 1e-3);
        assert_eq!(
            t.lat_stddev_ns, None,
            "not printed without -r, -l or --progress"
        );
    }

    #[test]
    fn each_script_is_a_job_after_the_run() {
        let bench = parse(&captured("pgbench-15-two-scripts.txt")).unwrap();
        let names: Vec<&str> = bench.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "multiple scripts",
                "<builtin: TPC-B (sort of)>",
                "<builtin: select only>"
            ]
        );
        let [run, tpcb, select] = [0, 1, 2].map(|i| transactions(&bench.jobs[i]));
        assert_eq!(run.count, tpcb.count + select.count);
        assert_eq!((tpcb.count, select.count), (16810, 5738));
        assert!((tpcb.tps - 3359.234007).abs() < 1e-6);
        assert!((select.lat_stddev_ns.unwrap() - 24_000.0).abs() < 1e-3);
        assert!((run.tps - (tpcb.tps + select.tps)).abs() < 0.01);
    }

    #[test]
    fn statement_latencies_change_nothing() {
        let bench = parse(&captured("pgbench-15-statement-latencies.txt")).unwrap();
        assert_eq!(bench.jobs.len(), 1);
        assert_eq!(transactions(&bench.jobs[0]).count, 17143);
        let line = &crate::recording::benchmark::describe(&bench)[0];
        assert!(line.starts_with("pgbench job <builtin: TPC-B (sort of)>: 3427.2 tps, 17,143 transactions (0 failed), latency average 584us"), "{line}");
    }

    #[test]
    fn other_text_is_not_pgbench() {
        assert!(parse("pgbench (15.18)\nconnection refused\n").is_none());
        assert!(parse("tps = 5\n").is_none());
    }
}

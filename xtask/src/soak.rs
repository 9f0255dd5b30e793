//! `cargo xtask soak`: zprof recording the lab's mixed workload for a long
//! time (30 minutes by default), to show what a long recording costs and
//! loses. A benchmark, not a test: it reports zprof's resident memory shortly
//! after attaching and at the end, its CPU time, the BPF programs' run time,
//! and every loss counter of the recording; it fails only if the run itself
//! fails. Also what the soaks of `zprof serve` share (`soak_serve`,
//! `soak_tls`): starting it, percentiles.

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

/// The mixed workload: random reads and writes, an fsync every 16 writes,
/// half-compressible data under lz4, on raidz1 of emulated SSDs with a log
/// device: every stage group fires.
pub fn lab_args(minutes: u64, dir: &Path) -> Vec<String> {
    let job = format!(
        "name=mixed,rw=randrw,rwmixread=60,bs=8k,size=512m,fsync=16,buffer_compress_percentage=50,runtime={minutes}m"
    );
    let args = [
        "run",
        "--layout",
        "raidz1:3",
        "--vdev-model",
        "ssd",
        "--logs",
        "1",
        "--compression",
        "lz4",
        "--vdev-size",
        "2g",
    ];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--job".into(),
        job,
        "--dir".into(),
        dir.display().to_string(),
        "--output-format".into(),
        "json".into(),
    ]);
    args
}

/// The unit of /proc's CPU times: fixed at 100 by the x86 ABI, whatever HZ the kernel runs at.
const USER_HZ: f64 = 100.0;

/// One look at a process: resident and peak resident memory, CPU time.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Duration,
    pub rss_kib: u64,
    pub peak_kib: u64,
    pub cpu_s: f64,
}

pub fn sample(pid: u32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // utime and stime are fields 14 and 15; the name (field 2) may hold spaces.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    Some(Sample {
        at,
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
        cpu_s: ticks as f64 / USER_HZ,
    })
}

/// zprof's memory and CPU over a soak: the sample 30 s in (attached, maps
/// and histograms populated) and the last, with a progress line every 5 min.
#[derive(Default)]
pub struct Footprint {
    first: Option<Sample>,
    last: Option<Sample>,
}

impl Footprint {
    pub fn observe(&mut self, pid: u32, at: Duration) {
        let Some(now) = sample(pid, at) else { return };
        if self.first.is_none() && now.at >= Duration::from_secs(30) {
            self.first = Some(now);
        }
        if now.at.as_secs().is_multiple_of(300) {
            eprintln!(
                "xtask: soak: {:.0} min, RSS {} KiB, zprof CPU {:.1} s",
                now.at.as_secs_f64() / 60.0,
                now.rss_kib,
                now.cpu_s
            );
        }
        self.last = Some(now);
    }

    /// The summary's memory and CPU fields (added to `summary`, an object).
    pub fn add_to(&self, summary: &mut Value) -> anyhow::Result<()> {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            bail!("zprof exited before 30 s: no samples")
        };
        let fields = json!({
            "rss_kib_at_30s": first.rss_kib,
            "rss_kib_at_end": last.rss_kib,
            "rss_end_over_start": last.rss_kib as f64 / first.rss_kib as f64,
            "peak_rss_kib": last.peak_kib,
            "zprof_cpu_s": last.cpu_s,
            "zprof_cpu_share_of_one_core": last.cpu_s / last.at.as_secs_f64(),
        });
        if let (Some(summary), Value::Object(fields)) = (summary.as_object_mut(), fields) {
            summary.extend(fields);
        }
        Ok(())
    }

    /// Prints the fields `add_to` added.
    pub fn print(s: &Value) {
        let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
        println!(
            "  zprof RSS           {} KiB at 30 s, {} KiB at the end ({:.3}x), peak {} KiB",
            s["rss_kib_at_30s"],
            s["rss_kib_at_end"],
            f("rss_end_over_start"),
            s["peak_rss_kib"]
        );
        println!(
            "  zprof CPU           {:.1} s ({:.2}% of one core)",
            f("zprof_cpu_s"),
            f("zprof_cpu_share_of_one_core") * 100.0
        );
    }
}

pub fn soak(root: &Path, minutes: u64) -> anyhow::Result<()> {
    ensure!(minutes > 0, "--minutes must be positive");
    let out_dir = root.join("target/soak");
    std::fs::create_dir_all(&out_dir)?;
    let scratch = std::env::temp_dir().join(format!("zprof-soak-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let recording_path = out_dir.join("soak.zprof.json");
    let mut child = Command::new(root.join("target/release/zprof"))
        .args(["record", "--target", "libzpool", "--no-explain", "-o"])
        .arg(&recording_path)
        .arg("--")
        .arg(root.join("target/release/zprof-lab"))
        .args(lab_args(minutes, &scratch))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting zprof")?;
    let stdout = child.stdout.take().expect("piped");
    let lab_output =
        std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let started = Instant::now();
    let pid = child.id();
    eprintln!("xtask: soak: {minutes} min of the lab's mixed workload under zprof (pid {pid})");
    let mut footprint = Footprint::default();
    while child.try_wait()?.is_none() {
        std::thread::sleep(Duration::from_secs(1));
        footprint.observe(pid, started.elapsed());
    }
    let status = child.wait()?;
    let _ = std::fs::remove_dir_all(&scratch);
    if !status.success() {
        bail!("zprof record exited with {status}");
    }
    let recording: Value = serde_json::from_str(&std::fs::read_to_string(&recording_path)?)?;
    let lab: Value = serde_json::Deserializer::from_str(&lab_output.join().unwrap_or_default())
        .into_iter::<Value>()
        .next()
        .context("no lab JSON on stdout")??;
    let mut summary = summarize(minutes, &recording, &lab);
    footprint.add_to(&mut summary)?;
    std::fs::write(
        out_dir.join("soak.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    print(&summary);
    eprintln!(
        "xtask: soak: results in {}",
        out_dir.join("soak.json").display()
    );
    Ok(())
}

fn summarize(minutes: u64, recording: &Value, lab: &Value) -> Value {
    let job = &lab["jobs"][0];
    let ops = job["write"]["total_ios"].as_u64().unwrap_or(0)
        + job["read"]["total_ios"].as_u64().unwrap_or(0);
    let programs = recording["bpf_programs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let bpf_ns: u64 = programs
        .iter()
        .map(|p| p["run_time_ns"].as_u64().unwrap_or(0))
        .sum();
    let bpf_runs: u64 = programs
        .iter()
        .map(|p| p["run_count"].as_u64().unwrap_or(0))
        .sum();
    let wall = recording["duration_s"].as_f64().unwrap_or(f64::NAN);
    let cpu = &recording["cpu"];
    json!({
        "minutes": minutes,
        "duration_s": wall,
        "workload_ops": ops,
        "workload_ops_per_s": ops as f64 / wall,
        "bpf_runs": bpf_runs,
        "bpf_run_time_s": bpf_ns as f64 / 1e9,
        "bpf_ns_per_workload_op": bpf_ns as f64 / ops.max(1) as f64,
        "losses": recording["losses"],
        "cpu_samples": cpu["samples_total"],
        "cpu_stacks_lost": cpu["stack_lost"],
        "cpu_sample_map_full": cpu["sample_map_full"],
        "warnings": recording["warnings"],
    })
}

fn print(s: &Value) {
    println!(
        "soak: {} min of the lab's mixed workload under zprof record",
        s["minutes"]
    );
    println!(
        "  workload            {} ops ({:.0}/s)",
        s["workload_ops"],
        s["workload_ops_per_s"].as_f64().unwrap_or(0.0)
    );
    Footprint::print(s);
    println!(
        "  BPF programs        {} runs, {:.1} s ({:.0} ns per workload op)",
        s["bpf_runs"],
        s["bpf_run_time_s"].as_f64().unwrap_or(0.0),
        s["bpf_ns_per_workload_op"].as_f64().unwrap_or(0.0)
    );
    println!("  losses              {}", s["losses"]);
    println!(
        "  CPU samples         {} (stacks lost {}, sample map full {})",
        s["cpu_samples"], s["cpu_stacks_lost"], s["cpu_sample_map_full"]
    );
}

/// Starts `zprof serve` on a free loopback port with `extra` options;
/// returns it and its address.
pub fn start_serve(root: &Path, extra: &[&str]) -> anyhow::Result<(Child, SocketAddr)> {
    let libzpool = [
        "/lib/x86_64-linux-gnu/libzpool.so.5",
        "/usr/lib/x86_64-linux-gnu/libzpool.so.5",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .context("libzpool.so.5 is not installed")?;
    let mut child = Command::new(root.join("target/release/zprof"))
        .args([
            "serve",
            "--target",
            &format!("libzpool={libzpool}"),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .context("starting zprof serve")?;
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let line = lines
        .find_map(|l| l.ok().filter(|l| l.contains("serving http")))
        .context("zprof serve exited before serving")?;
    eprintln!("xtask: soak: {line}");
    // The rest of its log goes to ours.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("{l}")));
    let address = line
        .rsplit("://")
        .next()
        .unwrap_or("")
        .trim_end_matches("/metrics")
        .parse()?;
    Ok((child, address))
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// A child killed if still running when dropped: a soak that fails part-way
/// must not leave an exporter attached.
pub struct KillOnDrop(pub Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

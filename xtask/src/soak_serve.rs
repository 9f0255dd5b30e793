//! `cargo xtask soak --serve`: `zprof serve` attached for a long time (30
//! minutes by default) while the lab runs its mixed workload, scraped every
//! second. A benchmark, not a test: it reports the exporter's resident memory
//! 30 s in and at the end, its CPU time, the time each scrape took (at the
//! client, and zprof's own time to read its maps), the size of a scrape, and
//! every loss counter of the last scrape; it fails only if a part of the run
//! fails (a scrape that errors, the exporter exiting, the lab failing).
//! `--tls` adds a second exporter with TLS and basic auth (`soak_tls`).

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use crate::soak::{Footprint, KillOnDrop, lab_args, percentile, start_serve};

/// One scrape as the client saw it.
struct Scrape {
    seconds: f64,
    bytes: usize,
    body: String,
}

fn scrape(address: SocketAddr) -> anyhow::Result<Scrape> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let seconds = started.elapsed().as_secs_f64();
    let (head, body) = reply.split_once("\r\n\r\n").context("no HTTP head")?;
    ensure!(
        // HTTP/1.0 asked, HTTP/1.0 answered (hyper), 1.1 by older servers.
        head.starts_with("HTTP/1.") && head.lines().next().unwrap_or("").contains(" 200 "),
        "scrape: {}",
        head.lines().next().unwrap_or("")
    );
    Ok(Scrape {
        seconds,
        bytes: body.len(),
        body: body.to_owned(),
    })
}

/// Sum of the samples of one metric (every label set) in an exposition.
fn metric_sum(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub fn soak_serve(root: &Path, minutes: u64, tls: bool) -> anyhow::Result<()> {
    ensure!(minutes > 0, "--minutes must be positive");
    let out_dir = root.join("target/soak");
    std::fs::create_dir_all(&out_dir)?;
    let scratch = std::env::temp_dir().join(format!("zprof-soak-serve-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let (serve, address) = start_serve(root, &[])?;
    let mut serve = KillOnDrop(serve);
    let pid = serve.id();
    let mut tls = match tls {
        true => Some(crate::soak_tls::TlsSide::start(
            root, &scratch, address, minutes,
        )?),
        false => None,
    };
    let mut lab = Command::new(root.join("target/release/zprof-lab"))
        .args(lab_args(minutes, &scratch))
        .stdout(Stdio::piped())
        .spawn()
        .context("starting zprof-lab")?;
    let lab_stdout = lab.stdout.take().expect("piped");
    let lab_output =
        std::thread::spawn(move || std::io::read_to_string(lab_stdout).unwrap_or_default());
    eprintln!(
        "xtask: soak: {minutes} min of the lab's mixed workload, zprof serve (pid {pid}) scraped every second"
    );
    let started = Instant::now();
    let (mut footprint, mut times, mut bytes, mut collect) =
        (Footprint::default(), Vec::new(), 0, Vec::new());
    while lab.try_wait()?.is_none() {
        let tick = Instant::now();
        if let Some(status) = serve.try_wait()? {
            bail!("zprof serve exited during the soak: {status}");
        }
        let s = scrape(address)?;
        times.push(s.seconds);
        bytes = s.bytes;
        collect.push(metric_sum(&s.body, "zprof_collect_seconds"));
        footprint.observe(pid, started.elapsed());
        if let Some(tls) = &mut tls {
            tls.observe(started.elapsed())?;
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    let lab_status = lab.wait()?;
    let final_scrape = scrape(address)?;
    let tls = tls.map(crate::soak_tls::TlsSide::finish).transpose()?;
    // SIGTERM, as systemd stops it: it must detach and exit 0.
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    let serve_status = serve.wait()?;
    let _ = std::fs::remove_dir_all(&scratch);
    ensure!(lab_status.success(), "zprof-lab exited with {lab_status}");
    ensure!(
        serve_status.success(),
        "zprof serve exited with {serve_status} on SIGTERM"
    );
    let lab: Value = serde_json::Deserializer::from_str(&lab_output.join().unwrap_or_default())
        .into_iter::<Value>()
        .next()
        .context("no lab JSON on stdout")??;
    let mut summary = summarize(
        minutes,
        &mut times,
        &mut collect,
        bytes,
        &final_scrape.body,
        &lab,
    );
    footprint.add_to(&mut summary)?;
    if let Some(tls) = tls {
        summary["tls"] = tls;
    }
    std::fs::write(
        out_dir.join("soak-serve.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    print(&summary);
    eprintln!(
        "xtask: soak: results in {}",
        out_dir.join("soak-serve.json").display()
    );
    Ok(())
}

fn summarize(
    minutes: u64,
    times: &mut [f64],
    collect: &mut [f64],
    bytes: usize,
    body: &str,
    lab: &Value,
) -> Value {
    times.sort_by(f64::total_cmp);
    collect.sort_by(f64::total_cmp);
    let job = &lab["jobs"][0];
    let lab_ops = job["write"]["total_ios"].as_u64().unwrap_or(0)
        + job["read"]["total_ios"].as_u64().unwrap_or(0);
    let losses: Vec<(String, f64)> = body
        .lines()
        .filter(|l| {
            l.starts_with("zprof_lost_events_total{")
                || l.starts_with("zprof_unmatched_returns_total{")
        })
        .filter_map(|l| {
            Some((
                l.rsplit_once(' ')?.0.to_owned(),
                l.rsplit(' ').next()?.parse().ok()?,
            ))
        })
        .collect();
    json!({
        "minutes": minutes,
        "scrapes": times.len(),
        "scrape_seconds_p50": percentile(times, 0.5),
        "scrape_seconds_p99": percentile(times, 0.99),
        "scrape_seconds_max": times.last(),
        "collect_seconds_p50": percentile(collect, 0.5),
        "collect_seconds_max": collect.last(),
        "scrape_bytes": bytes,
        "lab_ops": lab_ops,
        "exported_workload_ops": metric_sum(body, "zfs_workload_write_events_total") + metric_sum(body, "zfs_workload_read_events_total"),
        "exported_zil_commits": metric_sum(body, "zfs_zil_commit_duration_seconds_count"),
        "lab_zil_commits": lab["totals"]["zil_commits_all"],
        "lost_events_total": losses.iter().filter(|(k, _)| k.starts_with("zprof_lost")).map(|(_, v)| v).sum::<f64>(),
        "losses": losses.into_iter().filter(|(_, v)| *v > 0.0).collect::<Vec<_>>(),
    })
}

fn print(s: &Value) {
    let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "soak: {} min of the lab's mixed workload, zprof serve scraped every second",
        s["minutes"]
    );
    println!(
        "  scrapes             {} of {} bytes; client time p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        s["scrapes"],
        s["scrape_bytes"],
        f("scrape_seconds_p50") * 1e3,
        f("scrape_seconds_p99") * 1e3,
        f("scrape_seconds_max") * 1e3
    );
    println!(
        "  reading the maps    p50 {:.2} ms, max {:.2} ms (zprof_collect_seconds)",
        f("collect_seconds_p50") * 1e3,
        f("collect_seconds_max") * 1e3
    );
    Footprint::print(s);
    println!(
        "  workload            lab {} ops; exported reads+writes {}; zil commits exported {} (lab {})",
        s["lab_ops"], s["exported_workload_ops"], s["exported_zil_commits"], s["lab_zil_commits"]
    );
    println!(
        "  lost events         {} (non-zero loss counters: {})",
        s["lost_events_total"], s["losses"]
    );
    if s["tls"].is_object() {
        crate::soak_tls::print(&s["tls"]);
    }
}

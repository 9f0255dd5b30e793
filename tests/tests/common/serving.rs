//! What the tests of `zprof serve` share: a real Prometheus started on
//! loopback and queried, HTTP/1.0 gets, serve's start line.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// Kills what a test started, however it ends.
pub struct Reaper(pub Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SAFETY: kill on a child we spawned and have not waited for.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

/// An HTTP/1.0 GET (no chunked replies): status line and body.
pub fn get(
    address: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<(String, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {address}\r\n{accept}\r\n"
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    Ok((
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    ))
}

pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A PromQL instant query's values, one per series.
pub fn query_all(prometheus: SocketAddr, promql: &str) -> Vec<f64> {
    query_series(prometheus, promql, &[])
        .into_values()
        .collect()
}

/// A PromQL instant query's series, each named by its labels but those of
/// `without` (`job`, `instance`), with its value.
pub fn query_series(
    prometheus: SocketAddr,
    promql: &str,
    without: &[&str],
) -> std::collections::BTreeMap<String, f64> {
    let (status, body) = get(
        prometheus,
        &format!("/api/v1/query?query={}", percent_encode(promql)),
        None,
    )
    .unwrap();
    assert!(status.contains(" 200 "), "{promql}: {status}: {body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    reply["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut labels: Vec<String> = r["metric"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(name, _)| !without.contains(&name.as_str()))
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            labels.sort();
            // An index keeps series apart that the labels left make equal.
            let key = format!("{} #{i}", labels.join(","));
            let key = if without.is_empty() {
                key
            } else {
                labels.join(",")
            };
            (key, r["value"][1].as_str().unwrap().parse().unwrap())
        })
        .collect()
}

/// A PromQL instant query's single value (None: no series).
pub fn query(prometheus: SocketAddr, promql: &str) -> Option<f64> {
    let values = query_all(prometheus, promql);
    assert!(
        values.len() <= 1,
        "{promql}: more than one series: {values:?}"
    );
    values.first().copied()
}

pub fn monitoring() -> std::path::PathBuf {
    super::workspace().join("monitoring")
}

/// Reads a child's stderr until a line containing `marker`; returns that line.
pub fn line_with(child: &mut Child, marker: &str) -> String {
    let pipe = child.stderr.as_mut().unwrap();
    let (mut seen, started) = (String::new(), Instant::now());
    loop {
        if let Some(line) = seen
            .lines()
            .find(|l| l.contains(marker))
            .filter(|_| seen.ends_with('\n'))
        {
            return line.to_owned();
        }
        let mut buf = [0u8; 256];
        let n = pipe.read(&mut buf).unwrap();
        assert!(n > 0, "exited before {marker:?}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no {marker:?} in 60 s: {seen}"
        );
    }
}

pub fn start_prometheus(dir: &Path, target: SocketAddr) -> (Child, SocketAddr) {
    let job = format!("  - job_name: zprof\n    static_configs:\n      - targets: ['{target}']\n");
    start_prometheus_with(dir, &job, &["zprof"])
}

/// A Prometheus scraping every second with zprof's rules and the scrape
/// configs `jobs` (YAML list items), once it has scraped each job of
/// `names` successfully.
pub fn start_prometheus_with(dir: &Path, jobs: &str, names: &[&str]) -> (Child, SocketAddr) {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n{jobs}",
            monitoring().join("zprof-rules.yml").display()
        ),
    )
    .unwrap();
    // A free loopback port (Prometheus cannot report one it picked itself).
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("no prometheus: cargo xtask setup installs Debian's package");
    let started = Instant::now();
    while !get(address, "/-/ready", None).is_ok_and(|(status, _)| status.contains(" 200 ")) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Prometheus not ready in 60 s: see {}",
            dir.join("prometheus.log").display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its first scrape comes up to 5 s after it is ready (target discovery
    // is batched): a workload started before would be half unseen.
    while !names
        .iter()
        .all(|job| query(address, &format!("up{{job=\"{job}\"}}")) == Some(1.0))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Prometheus has not scraped zprof in 60 s: see {}",
            dir.join("prometheus.log").display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (child, address)
}

/// A query's value once it has stopped changing over three scrapes.
pub fn settled(prometheus: SocketAddr, promql: &str) -> f64 {
    let started = Instant::now();
    let mut last = Vec::new();
    loop {
        last.push(query(prometheus, promql));
        if last.len() >= 3
            && last[last.len() - 3..]
                .iter()
                .all(|v| v.is_some() && *v == last[last.len() - 1])
        {
            return last[last.len() - 1].unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{promql} did not settle: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(1100));
    }
}

/// Starts `zprof serve` on `libzpool` with `extra` options on a free
/// loopback port: the child (stderr piped), its address, its start line.
pub fn start_serve(libzpool: &Path, extra: &[&str]) -> (Child, SocketAddr, String) {
    let mut serve = super::zprof()
        .args([
            "serve",
            "--target",
            &format!("libzpool={}", libzpool.display()),
        ])
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = line_with(&mut serve, "serving http");
    let address = line
        .rsplit("://")
        .next()
        .unwrap()
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    (serve, address, line)
}

/// SIGTERM, exit 0 and the detach line.
pub fn stop(mut serve: Child) {
    // SAFETY: kill on our own child.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let status = serve.wait().unwrap();
    let mut rest = String::new();
    serve
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    assert!(
        status.success() && rest.contains("every probe detached"),
        "{status}: {rest}"
    );
}

//! `cargo xtask soak --serve --tls`: beside the soak's plain serve, a second
//! `zprof serve` with TLS and a basic-auth user (an exporter-toolkit web
//! configuration; certificates from openssl, the hash from htpasswd), both
//! scraped every second by curl as Prometheus scrapes: one connection kept
//! alive per exporter. It reports the TLS exporter's memory and CPU as the
//! plain one's, and the client's time per scrape both ways, with their ratio.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use crate::soak::Footprint;

const USER: &str = "prometheus";
const PASSWORD: &str = "soak-secret";

/// The TLS exporter and the two scrapers.
pub struct TlsSide {
    serve: Child,
    footprint: Footprint,
    plain_curl: Child,
    tls_curl: Child,
}

/// Runs `program args` in `dir`; fails with its stderr.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| format!("running {program} (cargo xtask setup installs it)"))?;
    ensure!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A CA, a server certificate for 127.0.0.1 and the web configuration.
fn web_config(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let ca = [
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=zprof-soak-ca",
    ];
    run_in(dir, "openssl", &[&["req", "-x509"][..], &ec, &ca].concat())?;
    let csr = [
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ];
    run_in(dir, "openssl", &[&["req"][..], &ec, &csr].concat())?;
    std::fs::write(dir.join("san.cnf"), "subjectAltName=IP:127.0.0.1\n")?;
    run_in(
        dir,
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "1",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
        ],
    )?;
    let line = run_in(dir, "htpasswd", &["-nbBC", "10", USER, PASSWORD])?;
    let hash = line.trim().split_once(':').context("htpasswd's line")?.1;
    let path = dir.join("web.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  {USER}: {hash}\n"
        ),
    )?;
    Ok(path)
}

/// curl scraping `url` once a second for `minutes` on one kept-alive
/// connection, printing each scrape's status and time when it exits (its
/// output is buffered: it is waited for, not killed).
fn scraper(url: &str, minutes: u64, extra: &[String]) -> anyhow::Result<Child> {
    let mut curl = Command::new("curl");
    curl.args(["-s", "--rate", "1/s", "-w", "%{http_code} %{time_total}\\n"])
        .args(extra);
    for _ in 0..minutes * 60 {
        curl.args(["-o", "/dev/null", url]);
    }
    curl.stdout(Stdio::piped())
        .spawn()
        .context("starting curl (cargo xtask setup installs it)")
}

/// An error part-way must not leave an exporter attached or curl scraping.
impl Drop for TlsSide {
    fn drop(&mut self) {
        for child in [&mut self.serve, &mut self.plain_curl, &mut self.tls_curl] {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl TlsSide {
    /// Starts the TLS exporter beside the plain one at `plain`, and the
    /// scrapers of both.
    pub fn start(
        root: &Path,
        scratch: &Path,
        plain: std::net::SocketAddr,
        minutes: u64,
    ) -> anyhow::Result<Self> {
        let web = web_config(scratch)?;
        let (serve, address) =
            crate::soak::start_serve(root, &["--web.config.file", web.to_str().context("path")?])?;
        let tls_options = [
            "--cacert".to_owned(),
            scratch.join("ca.pem").display().to_string(),
            "-u".to_owned(),
            format!("{USER}:{PASSWORD}"),
        ];
        let plain_curl = scraper(&format!("http://{plain}/metrics"), minutes, &[])?;
        // Half a second apart: scrapes at the same moment would compete for
        // the CPU, and the one served first would look faster.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Self {
            serve,
            footprint: Footprint::default(),
            plain_curl,
            tls_curl: scraper(&format!("https://{address}/metrics"), minutes, &tls_options)?,
        })
    }

    pub fn observe(&mut self, at: Duration) -> anyhow::Result<()> {
        if let Some(status) = self.serve.try_wait()? {
            anyhow::bail!("the TLS zprof serve exited during the soak: {status}");
        }
        self.footprint.observe(self.serve.id(), at);
        Ok(())
    }

    /// Waits for the scrapers and stops the TLS exporter (SIGTERM: it must
    /// exit 0); the summary's "tls" object.
    pub fn finish(mut self) -> anyhow::Result<Value> {
        let plain = scrape_times(&mut self.plain_curl)?;
        let tls = scrape_times(&mut self.tls_curl)?;
        Command::new("kill")
            .args(["-TERM", &self.serve.id().to_string()])
            .status()?;
        let status = self.serve.wait()?;
        ensure!(
            status.success(),
            "the TLS zprof serve exited with {status} on SIGTERM"
        );
        let p = |times: &[f64], q: f64| crate::soak::percentile(times, q);
        let mut summary = json!({
            "scrapes_plain": plain.len(),
            "scrapes_tls": tls.len(),
            "curl_plain_seconds_p50": p(&plain, 0.5),
            "curl_plain_seconds_p99": p(&plain, 0.99),
            "curl_tls_seconds_p50": p(&tls, 0.5),
            "curl_tls_seconds_p99": p(&tls, 0.99),
            "tls_over_plain_p50": p(&tls, 0.5) / p(&plain, 0.5),
        });
        self.footprint.add_to(&mut summary)?;
        Ok(summary)
    }
}

/// Waits for a scraper (a minute at most) and reads its scrapes' times,
/// sorted; every scrape must have been answered 200.
fn scrape_times(curl: &mut Child) -> anyhow::Result<Vec<f64>> {
    let started = std::time::Instant::now();
    while curl.try_wait()?.is_none() {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "curl still scraping a minute after the lab"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(curl.stdout.as_mut().context("piped")?, &mut out)?;
    let mut times = Vec::new();
    for line in out.lines() {
        let (code, seconds) = line.split_once(' ').context("curl's -w line")?;
        ensure!(code == "200", "a scrape answered {code}");
        times.push(seconds.parse::<f64>()?);
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// The TLS lines of the soak's report.
pub fn print(tls: &Value) {
    let f = |k: &str| tls[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "  TLS and basic auth  curl on a kept-alive connection: plain p50 {:.2} ms, p99 {:.2} ms ({} scrapes); TLS p50 {:.2} ms, p99 {:.2} ms ({}); TLS/plain p50 {:.2}",
        f("curl_plain_seconds_p50") * 1e3,
        f("curl_plain_seconds_p99") * 1e3,
        tls["scrapes_plain"],
        f("curl_tls_seconds_p50") * 1e3,
        f("curl_tls_seconds_p99") * 1e3,
        tls["scrapes_tls"],
        f("tls_over_plain_p50")
    );
    println!(
        "  TLS exporter        RSS {} KiB at 30 s, {} KiB at the end ({:.3}x), CPU {:.1} s",
        tls["rss_kib_at_30s"],
        tls["rss_kib_at_end"],
        f("rss_end_over_start"),
        f("zprof_cpu_s")
    );
}

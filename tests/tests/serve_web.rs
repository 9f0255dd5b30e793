//! `zprof serve`'s web side (issue 36), against real peers on loopback:
//! - Debian's Prometheus scrapes one serve over TLS with basic auth (an
//!   exporter-toolkit web configuration) and one over plain HTTP, both
//!   attached before the lab runs: the same samples; curl gets 401 with a
//!   wrong or no password, and plain HTTP to the TLS port gets no answer;
//! - bad web configurations (an expired certificate, a key of another
//!   certificate, a weak hash) are refused at start, before anything attaches;
//! - hostile clients (1,000 idle connections, a 1 MiB header, a byte a
//!   second, garbage, HTTP/1.0, HTTP/2 prior knowledge, 8 clients scraping
//!   as fast as they can for 60 s) do not keep a scrape a second from being
//!   answered within 1 s, serve's memory stays bounded, and SIGTERM leaves
//!   nothing loaded.
//!
//! Certificates come from openssl(1), password hashes from htpasswd
//! (apache2-utils), both installed by the set-up. Needs root.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Child, Command},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

mod common;
use common::serving::{
    Reaper, line_with, query, query_series, settled, start_prometheus_with, start_serve, stop,
};
use common::{lab_releases, require_root, run_ok, scratch, zprof};

const USER: &str = "prometheus";
const PASSWORD: &str = "scrape-secret";

/// A CA, a server certificate it signs for 127.0.0.1 and localhost, the
/// same request signed already expired, and a key of nothing.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| run_ok(Command::new("openssl").args(args).current_dir(dir));
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=zprof-test-ca",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("san.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    for (out, days) in [("server.pem", "2"), ("expired.pem", "-1")] {
        openssl(&[
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
            out,
            "-days",
            days,
            "-extfile",
            "san.cnf",
        ]);
    }
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "other.key",
    ]);
}

/// htpasswd's bcrypt hash of `password` at `cost`.
fn bcrypt_hash(password: &str, cost: u32) -> String {
    let line = run_ok(Command::new("htpasswd").args(["-nbBC", &cost.to_string(), USER, password]));
    line.trim().split_once(':').unwrap().1.to_owned()
}

/// The lab's fsync writes for `runtime` ("runtime=3"); its JSON.
fn run_lab(lab: &Path, dir: &Path, runtime: &str) -> serde_json::Value {
    let job = format!("name=f,rw=randwrite,bs=4k,size=8m,{runtime},fsync=1");
    let stdout = run_ok(Command::new(lab).args(["run", "--dir"]).arg(dir).args([
        "--job",
        &job,
        "--output-format",
        "json",
    ]));
    common::first_json(&stdout)
}

/// curl's status code for a GET of /metrics with `options`.
fn curl_status(options: &[&str], url: &str) -> String {
    let output = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(options)
        .arg(url)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn prometheus_scrapes_serve_over_tls_with_basic_auth_and_gets_the_samples_of_plain_http() {
    require_root();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-serve-tls", &release.version);
    make_certificates(&dir);
    std::fs::write(dir.join("password"), PASSWORD).unwrap();
    // File names relative to the configuration's directory, as
    // exporter-toolkit reads them.
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS12\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\nbasic_auth_users:\n  {USER}: {}\n",
            bcrypt_hash(PASSWORD, 10)
        ),
    )
    .unwrap();
    let (plain, plain_address, _) = start_serve(&release.libzpool, &[]);
    let (tls, tls_address, line) = start_serve(
        &release.libzpool,
        &["--web.config.file", web.to_str().unwrap()],
    );
    eprintln!("{line}");
    assert!(line.contains("TLS, 1 basic-auth user(s)"), "{line}");
    let mut reaper = Reaper(vec![plain, tls]);
    let jobs = format!(
        "  - job_name: plain\n    static_configs:\n      - targets: ['{plain_address}']\n  - job_name: tls\n    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: {USER}\n      password_file: {}\n    static_configs:\n      - targets: ['{tls_address}']\n",
        dir.join("ca.pem").display(),
        dir.join("password").display()
    );
    let (prometheus, prometheus_address) = start_prometheus_with(&dir, &jobs, &["plain", "tls"]);
    reaper.0.push(prometheus);

    let lab = run_lab(&release.lab, &dir, "runtime=3");
    let pool = lab["jobs"][0]["pool"]["name"].as_str().unwrap().to_owned();
    let commits = |job: &str| {
        settled(
            prometheus_address,
            &format!("sum(zfs_zil_commit_duration_seconds_count{{job=\"{job}\",pool=\"{pool}\"}})"),
        )
    };
    let (over_tls, over_plain) = (commits("tls"), commits("plain"));
    // Every series of the pool's stage families, both ways. The two serves
    // time each call apart (each one's probes run beside the other's), so a
    // call can land in a neighbouring bucket: the counts must be equal, the
    // buckets only shown.
    let samples = |job: &str, suffix: &str| {
        query_series(
            prometheus_address,
            &format!("{{job=\"{job}\",pool=\"{pool}\",__name__=~\"zfs_.*_{suffix}\"}}"),
            &["job", "instance"],
        )
    };
    let (tls_counts, plain_counts) = (samples("tls", "count"), samples("plain", "count"));
    let (tls_buckets, plain_buckets) = (samples("tls", "bucket"), samples("plain", "bucket"));
    let moved = tls_buckets
        .iter()
        .filter(|(series, value)| plain_buckets.get(*series) != Some(value))
        .count();
    eprintln!(
        "{pool}: zil_commit calls over TLS {over_tls}, over plain HTTP {over_plain}; {} and {} stage counts, {} and {} buckets ({moved} of them with calls in a neighbour)",
        tls_counts.len(),
        plain_counts.len(),
        tls_buckets.len(),
        plain_buckets.len(),
    );
    assert!(over_tls > 0.0 && over_tls == over_plain);
    assert!(!tls_counts.is_empty() && tls_counts == plain_counts);
    assert!(
        tls_buckets.keys().eq(plain_buckets.keys()),
        "the same bucket series"
    );
    assert_eq!(query(prometheus_address, "up{job=\"tls\"}"), Some(1.0));

    let url = format!("https://{tls_address}/metrics");
    let ca = dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let right = format!("{USER}:{PASSWORD}");
    let wrong = format!("{USER}:not-{PASSWORD}");
    for (what, options, expected) in [
        (
            "the right password",
            vec!["--cacert", ca, "-u", &right],
            "200",
        ),
        (
            "a wrong password",
            vec!["--cacert", ca, "-u", &wrong],
            "401",
        ),
        ("no password", vec!["--cacert", ca], "401"),
        // curl's own refusal (000): the certificate is not in its default store.
        ("no CA", vec!["-u", &right], "000"),
    ] {
        assert_eq!(curl_status(&options, &url), expected, "{what}");
    }
    let headers = run_ok(Command::new("curl").args([
        "-s",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "--cacert",
        ca,
        "-u",
        &right,
        &url,
    ]));
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("x-content-type-options: nosniff"),
        "{headers}"
    );
    // Plain HTTP to the TLS port: a TLS alert or a close, never an answer.
    let mut stream = TcpStream::connect(tls_address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: zprof\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    assert!(
        !reply.starts_with(b"HTTP/"),
        "plain HTTP answered: {:?}",
        String::from_utf8_lossy(&reply)
    );
    eprintln!(
        "plain HTTP to the TLS port: {} bytes back, no HTTP answer",
        reply.len()
    );

    let serves: Vec<Child> = reaper.0.drain(..2).collect();
    serves.into_iter().for_each(stop);
    drop(reaper);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_web_configurations_are_refused_before_anything_attaches() {
    require_root();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-serve-refused", &release.version);
    make_certificates(&dir);
    let strong = bcrypt_hash(PASSWORD, 10);
    let weak = bcrypt_hash(PASSWORD, 4);
    let tls = |cert: &str, key: &str| {
        format!("tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    };
    for (name, text, says) in [
        (
            "expired",
            tls("expired.pem", "server.key"),
            "the certificate expired on",
        ),
        (
            "mismatched",
            tls("server.pem", "other.key"),
            "the key does not match the certificate",
        ),
        (
            "weak",
            format!("basic_auth_users:\n  {USER}: {weak}\n"),
            "cost 4 (weak: under 10)",
        ),
        (
            "tls10",
            tls("server.pem", "server.key") + "  min_version: TLS10\n",
            "TLS 1.2 and 1.3 only",
        ),
        (
            "typo",
            format!("basic_auth_user:\n  {USER}: {strong}\n"),
            "unknown field `basic_auth_user`",
        ),
        (
            "unverified",
            tls("server.pem", "server.key") + "  client_auth_type: RequireAnyClientCert\n",
            "does not verify",
        ),
    ] {
        let path = dir.join(format!("{name}.yml"));
        std::fs::write(&path, text).unwrap();
        let output = zprof()
            .args([
                "serve",
                "--target",
                &format!("libzpool={}", release.libzpool.display()),
            ])
            .args([
                "--listen",
                "127.0.0.1:0",
                "--web.config.file",
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr);
        eprintln!("{name}: exit {:?}: {}", output.status.code(), said.trim());
        assert_eq!(output.status.code(), Some(2), "{name}: {said}");
        assert!(
            said.contains(says) && said.contains(&format!("{name}.yml")),
            "{name}: {said}"
        );
        assert!(
            !said.contains("attached") && said.lines().count() == 1,
            "{name}: {said}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// serve's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Sends `request` on a new connection and reads until the server closes
/// or `wait` passes: what came back, and when it ended.
fn exchange(address: SocketAddr, request: &[u8], wait: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    // A server that closes while a large request is still being sent resets
    // the rest: the reply may come back or not, the write may fail.
    let _ = stream.write_all(request);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    (reply, started.elapsed())
}

fn status_line(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .lines()
        .next()
        .unwrap_or("(nothing)")
        .to_owned()
}

/// One legitimate scrape: HTTP/1.0 GET /metrics, its status and time.
fn scrape(address: SocketAddr) -> (String, Duration) {
    let (reply, took) = exchange(
        address,
        b"GET /metrics HTTP/1.0\r\nHost: zprof\r\n\r\n",
        Duration::from_secs(10),
    );
    (status_line(&reply), took)
}

/// Lets this test hold 1,000 sockets and more (the default soft limit is 1,024).
fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on a struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

#[test]
fn hostile_clients_do_not_keep_a_scrape_a_second_from_being_answered() {
    require_root();
    raise_open_files();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-serve-hostile", &release.version);
    let programs_before = aya::programs::loaded_programs().count();
    let (serve, address, _) = start_serve(&release.libzpool, &[]);
    let pid = serve.id();
    let reaper = Reaper(vec![serve]);
    // Rows to export: a short lab run while serve is attached.
    run_lab(&release.lab, &dir, "runtime=2");
    let (first, _) = scrape(address);
    assert!(first.contains(" 200 "), "{first}");
    let rss_start = rss_kib(pid);

    let idle: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    let running = Arc::new(AtomicBool::new(true));
    let storm_scrapes = Arc::new(AtomicU64::new(0));
    let storm: Vec<_> = (0..8)
        .map(|_| {
            let (running, count) = (running.clone(), storm_scrapes.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    let (status, _) = scrape(address);
                    assert!(status.contains(" 200 "), "a storm scrape: {status}");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let hostile = std::thread::spawn(move || hostile_requests(address));

    // The legitimate scraper: once a second for 60 s, each within 1 s.
    let mut slowest = Duration::ZERO;
    let mut rss_most = rss_start;
    let started = Instant::now();
    let mut scrapes = 0;
    while started.elapsed() < Duration::from_secs(60) {
        let (status, took) = scrape(address);
        assert!(
            status.contains(" 200 "),
            "scrape {scrapes}: {status} after {took:?}"
        );
        slowest = slowest.max(took);
        scrapes += 1;
        rss_most = rss_most.max(rss_kib(pid));
        std::thread::sleep(Duration::from_secs(1).saturating_sub(took));
    }
    running.store(false, Ordering::Relaxed);
    storm.into_iter().for_each(|t| t.join().unwrap());
    let said = hostile.join().unwrap();
    // Still open: a read would block; closed: end of file or reset.
    let still_open = |s: &TcpStream| {
        s.set_nonblocking(true).unwrap();
        matches!((&*s).read(&mut [0u8; 64]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    };
    let idle_closed = idle.iter().filter(|s| !still_open(s)).count();
    eprintln!(
        "{scrapes} scrapes, the slowest {slowest:?}; the storm's 8 clients {} scrapes in 60 s; {idle_closed} of 1,000 idle connections closed by serve; RSS {rss_start} KiB at the start, {rss_most} KiB at most\n{said}",
        storm_scrapes.load(Ordering::Relaxed)
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape took {slowest:?}"
    );
    assert_eq!(idle_closed, 1000, "idle connections left open for 60 s");
    // 256 connections at once, each with hyper's buffers (16 KiB headers at
    // most, the exposition's few hundred KiB shared), and the allocator's slack.
    assert!(
        rss_most < rss_start + 64 * 1024,
        "RSS grew from {rss_start} to {rss_most} KiB"
    );
    drop(reaper);
    let settle = Instant::now();
    while aya::programs::loaded_programs().count() > programs_before
        && settle.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        aya::programs::loaded_programs().count(),
        programs_before,
        "programs left loaded"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A hostile request: what it is, its bytes, and whether a reply (its status
/// line, whether it was empty) is the right one.
type HostileRequest<'a> = (&'a str, &'a [u8], fn(&str, bool) -> bool);

/// The hostile clients' requests, each answered or cut as it should be; a
/// line per kind for the log.
fn hostile_requests(address: SocketAddr) -> String {
    let mut said = Vec::new();
    let header = format!(
        "GET /metrics HTTP/1.1\r\nHost: zprof\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let requests: [HostileRequest; 3] = [
        ("a 1 MiB header", header.as_bytes(), |status, empty| {
            status.contains(" 431 ") || empty
        }),
        (
            "garbage",
            b"\x16\x03\x01garbage\r\n\r\n",
            |status, empty| status.contains(" 400 ") || empty,
        ),
        (
            "HTTP/2 prior knowledge",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            |status, _| !status.contains(" 200 "),
        ),
    ];
    for (what, request, right) in requests {
        let (reply, took) = exchange(address, request, Duration::from_secs(10));
        let status = status_line(&reply);
        assert!(right(&status, reply.is_empty()), "{what}: {status}");
        said.push(format!("{what}: {status} in {took:?}"));
    }
    let (status, took) = scrape(address);
    assert!(
        status.starts_with("HTTP/1.") && status.contains(" 200 "),
        "HTTP/1.0: {status}"
    );
    said.push(format!("HTTP/1.0: {status} in {took:?}"));
    // A byte a second: cut when the header time (5 s) is up.
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).unwrap();
    let mut sent = 0;
    // The first write after serve closes is taken by the kernel; the next
    // meets the reset.
    for byte in b"GET /metrics HTTP/1.1\r\nHost: zprof\r\nX-Slow: yes\r\n" {
        if stream.write_all(&[*byte]).is_err() || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    let cut = started.elapsed();
    assert!(
        cut < Duration::from_secs(20),
        "a byte a second kept its connection {cut:?}"
    );
    said.push(format!("a byte a second: cut after {sent} bytes, {cut:?}"));
    said.join("\n")
}

/// SIGHUP (`systemctl reload`) re-reads the web configuration: a user added
/// is asked for at once; a bad file keeps the previous configuration.
#[test]
fn sighup_rereads_the_web_configuration_and_a_bad_file_keeps_the_last_good_one() {
    require_root();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-serve-reload", &release.version);
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n",
    )
    .unwrap();
    let (mut serve, address, _) = start_serve(
        &release.libzpool,
        &["--web.config.file", web.to_str().unwrap()],
    );
    let url = format!("http://{address}/metrics");
    let right = format!("{USER}:{PASSWORD}");
    assert_eq!(curl_status(&[], &url), "200");
    let hangup = |serve: &mut Child, marker: &str| {
        // SAFETY: kill on our own child.
        unsafe { libc::kill(serve.id() as i32, libc::SIGHUP) };
        line_with(serve, marker)
    };
    std::fs::write(
        &web,
        format!(
            "basic_auth_users:\n  {USER}: {}\n",
            bcrypt_hash(PASSWORD, 10)
        ),
    )
    .unwrap();
    let said = hangup(&mut serve, "SIGHUP: re-read");
    eprintln!("{said}");
    assert!(said.contains("1 basic-auth user(s)"), "{said}");
    assert_eq!(curl_status(&[], &url), "401", "a user added is asked for");
    assert_eq!(curl_status(&["-u", &right], &url), "200");
    std::fs::write(&web, "basic_auth_users: [").unwrap();
    let said = hangup(&mut serve, "previous configuration stays");
    eprintln!("{said}");
    assert_eq!(
        curl_status(&["-u", &right], &url),
        "200",
        "the last good file"
    );
    assert_eq!(curl_status(&[], &url), "401", "the last good file");
    stop(serve);
    std::fs::remove_dir_all(dir).unwrap();
}

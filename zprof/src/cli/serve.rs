//! `zprof serve`: attach once and serve the in-kernel aggregates at
//! `/metrics`, in the Prometheus text format (OpenMetrics when the scraper's
//! Accept header asks for it), until SIGTERM or SIGINT detaches every probe.
//!
//! A foreground process for systemd: it logs to stderr, one line per event
//! worth knowing (attached, listening, a bad request, stopping), in the
//! journal's conventions, and says when it is ready (`cli::service`). It has no
//! configuration file, so SIGHUP only says so (and does not kill it, as the
//! default action would). The HTTP side is the least a scraper needs: one
//! request per connection, answered in turn on one thread, which also keeps
//! reads of the maps from overlapping.

use std::time::Duration;

use anyhow::Context as _;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

use crate::{
    cli::args::{LiveArgs, ServeArgs},
    cli::common::{UsageError, prepare},
    cli::service::{self, Priority, log},
    collect::session::{Session, SessionOptions},
    render::exposition::{self, Options},
    zfs::target,
};

/// How long a client has to send its request line and headers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Requests larger than this are refused (a scrape's is a few hundred bytes).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Runs the exporter until a signal; returns the exit status.
pub fn serve(args: ServeArgs) -> anyhow::Result<i32> {
    // The address is taken before anything is attached: a port in use must
    // not leave probes behind or cost an attach.
    let listener = std::net::TcpListener::bind(args.listen).map_err(|e| {
        UsageError(format!(
            "cannot listen on {}: {e}; pass --listen ADDR:PORT (a free port)",
            args.listen
        ))
    })?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    let session = attach_everywhere(&args.attach)?;
    let options = Options {
        per_vdev: args.per_vdev,
        max_series: args.max_series as usize,
        openmetrics: false,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(session, listener, address, options))
}

/// Attaches for every process (no filter, no CPU sampling, no per-event
/// streams): what the long-running views (`serve`, `top`) read.
pub(crate) fn attach_everywhere(args: &LiveArgs) -> anyhow::Result<Session> {
    let (target, found) = prepare(
        &args.target,
        &target::Traced {
            command: None,
            pid: None,
        },
    )?;
    let mut session = Session::start(
        target,
        found,
        &SessionOptions {
            filter_pids: None,
            hist_entries: args.hist_entries,
            sample_hz: 0,
            stack_entries: None,
            full_timing: args.full_timing,
            skip: args.skip.clone(),
            off_cpu: false,
            slower_than: None,
            request_rows: 1024,
        },
    )?;
    session.forget_pools_after(args.forget_after);
    Ok(session)
}

async fn run(
    mut session: Session,
    listener: std::net::TcpListener,
    address: std::net::SocketAddr,
    options: Options,
) -> anyhow::Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let listener = TcpListener::from_std(listener)?;
    let attached = session.probes().iter().filter(|p| p.attached).count();
    let release = session.release();
    log(
        Priority::Info,
        &format!(
            "zprof serve: {attached} of {} probe points attached (OpenZFS {}, {}); serving http://{address}/metrics",
            session.probes().len(),
            release.version.as_deref().unwrap_or("of unknown release"),
            release.status.word()
        ),
    );
    service::notify("READY=1");
    let why = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if let Err(err) = answer(&mut session, stream, &options).await {
                        log(Priority::Warning, &format!("zprof serve: request from {peer}: {err:#}"));
                    }
                }
                Err(err) => log(Priority::Warning, &format!("zprof serve: accept: {err}")),
            },
            _ = hangup.recv() => log(Priority::Warning, "zprof serve: SIGHUP: there is no configuration file to re-read; still serving"),
            _ = interrupt.recv() => break "SIGINT",
            _ = terminate.recv() => break "SIGTERM",
        }
    };
    service::notify("STOPPING=1");
    drop(session);
    log(
        Priority::Info,
        &format!("zprof serve: {why}: every probe detached"),
    );
    Ok(0)
}

/// What a request asked for.
#[derive(Debug, PartialEq)]
struct Request {
    method: String,
    path: String,
    openmetrics: bool,
}

/// Parses a request's line and headers (all of it up to the blank line).
fn parse_request(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, value)| value.to_ascii_lowercase())
        .unwrap_or_default();
    Some(Request {
        method,
        path,
        openmetrics: accept.contains("application/openmetrics-text"),
    })
}

async fn read_head(stream: &mut TcpStream) -> anyhow::Result<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        anyhow::ensure!(
            head.len() < MAX_REQUEST_BYTES,
            "request larger than {MAX_REQUEST_BYTES} bytes"
        );
        let n = stream.read(&mut buffer).await?;
        anyhow::ensure!(n > 0, "connection closed before the request ended");
        head.extend_from_slice(&buffer[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

async fn answer(
    session: &mut Session,
    mut stream: TcpStream,
    options: &Options,
) -> anyhow::Result<()> {
    let head = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream))
        .await
        .context("no request within 5 s")??;
    let (status, content_type, body) = match parse_request(&head) {
        Some(r) if r.method != "GET" && r.method != "HEAD" => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_owned(),
        ),
        Some(r) if r.path == "/metrics" || r.path.starts_with("/metrics?") => {
            let options = Options {
                openmetrics: r.openmetrics,
                ..*options
            };
            let scrape = session.live()?;
            let content_type = if r.openmetrics {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            let body = exposition::render(&scrape, &options);
            (
                "200 OK",
                content_type,
                if r.method == "HEAD" {
                    String::new()
                } else {
                    body
                },
            )
        }
        Some(r) if r.path == "/" => (
            "200 OK",
            "text/plain",
            "zprof serve: the stages are at /metrics\n".to_owned(),
        ),
        Some(_) => (
            "404 Not Found",
            "text/plain",
            "not found: the stages are at /metrics\n".to_owned(),
        ),
        None => ("400 Bad Request", "text/plain", "bad request\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_request_is_read_with_its_accept_header() {
        // Debian 12's Prometheus 2.42 scraping 127.0.0.1:19931, as received.
        let head = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:19931\r\nUser-Agent: Prometheus/2.42.0+ds\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 1\r\n\r\n";
        assert_eq!(
            parse_request(head),
            Some(Request {
                method: "GET".into(),
                path: "/metrics".into(),
                openmetrics: true
            })
        );
        let plain = parse_request("GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        assert!(!plain.openmetrics);
        assert_eq!(parse_request(""), None);
    }
}

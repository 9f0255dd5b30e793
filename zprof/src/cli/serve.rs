//! `zprof serve`: attach once and serve the in-kernel aggregates at
//! `/metrics`, in the Prometheus text format (OpenMetrics when the scraper's
//! Accept header asks for it), until SIGTERM or SIGINT detaches every probe.
//!
//! A foreground process for systemd: it logs to stderr, one line per event
//! worth knowing (attached, listening, reloaded, stopping), in the journal's
//! conventions, and says when it is ready (`cli::service`). TLS, users and
//! limits come from an exporter-toolkit web configuration
//! (`cli::web_config`), re-read on SIGHUP; the HTTP side is hyper's
//! (`cli::serve_http`).

use std::rc::Rc;

use tokio::net::TcpListener;

use crate::{
    cli::args::{LiveArgs, ServeArgs},
    cli::common::{UsageError, prepare},
    cli::serve_http::{self, Shared},
    cli::service::{self, Priority, log},
    cli::web_config::WebConfig,
    collect::session::{Session, SessionOptions},
    render::exposition::Options,
    zfs::target,
};

/// Runs the exporter until a signal; returns the exit status.
pub fn serve(args: ServeArgs) -> anyhow::Result<i32> {
    // The web configuration and the address are taken before anything is
    // attached: a bad file or a port in use must not leave probes behind or
    // cost an attach.
    let config = match &args.web_config {
        Some(path) => WebConfig::load(path).map_err(|e| UsageError(format!("{e:#}")))?,
        None => WebConfig::default(),
    };
    let listener = std::net::TcpListener::bind(args.listen).map_err(|e| {
        UsageError(format!(
            "cannot listen on {}: {e}; pass --listen ADDR:PORT (a free port)",
            args.listen
        ))
    })?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    warn_if_exposed(address, &config);
    let session = attach_everywhere(&args.attach)?;
    let options = Options {
        per_vdev: args.per_vdev,
        max_series: args.max_series as usize,
        openmetrics: false,
    };
    // bcrypt runs on blocking threads: two at most (serve_http), within the
    // unit's TasksMax.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        .build()?;
    let shared = Shared::new(session, options, config);
    // Connections are tasks of this LocalSet (the session is not Send);
    // dropping it drops them, and with them every hold on the session.
    let local = tokio::task::LocalSet::new();
    let why = local.block_on(&runtime, run(shared.clone(), listener, address))?;
    drop(local);
    service::notify("STOPPING=1");
    drop(shared.into_session());
    log(
        Priority::Info,
        &format!("zprof serve: {why}: every probe detached"),
    );
    Ok(0)
}

/// Says what anyone who reaches a non-loopback port can read when the
/// web configuration neither encrypts nor authenticates.
fn warn_if_exposed(address: std::net::SocketAddr, config: &WebConfig) {
    if address.ip().is_loopback() {
        return;
    }
    let missing = match (config.tls.is_some(), config.authenticates()) {
        (true, true) => return,
        (false, false) => "without TLS or authentication",
        (false, true) => "without TLS (passwords cross the network in clear)",
        (true, false) => "without authentication",
    };
    log(
        Priority::Warning,
        &format!(
            "zprof serve: listening on {address} {missing}: whoever reaches this port reads the pools, datasets, processes and cgroups the series name; set tls_server_config and basic_auth_users in --web.config.file"
        ),
    );
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
    shared: Rc<Shared>,
    listener: std::net::TcpListener,
    address: std::net::SocketAddr,
) -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let listener = TcpListener::from_std(listener)?;
    log(Priority::Info, &start_line(&shared, address));
    service::notify("READY=1");
    Ok(loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::task::spawn_local(serve_http::connection(shared.clone(), stream, peer));
                }
                // Out of descriptors, say: the next accept may succeed.
                Err(err) => {
                    log(Priority::Warning, &format!("zprof serve: accept: {err}"));
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            _ = hangup.recv() => reload(&shared),
            _ = interrupt.recv() => break "SIGINT",
            _ = terminate.recv() => break "SIGTERM",
        }
    })
}

/// "zprof serve: 41 of 44 probe points attached (OpenZFS 2.4.4, verified);
/// TLS, 1 basic-auth user(s); serving https://127.0.0.1:9929/metrics" (the
/// address last, where scripts and tests read it).
fn start_line(shared: &Shared, address: std::net::SocketAddr) -> String {
    let session = shared.session();
    let attached = session.probes().iter().filter(|p| p.attached).count();
    let release = session.release();
    let config = shared.config();
    format!(
        "zprof serve: {attached} of {} probe points attached (OpenZFS {}, {}); {}; serving {}://{address}/metrics",
        session.probes().len(),
        release.version.as_deref().unwrap_or("of unknown release"),
        release.status.word(),
        config.describe(),
        if config.tls.is_some() {
            "https"
        } else {
            "http"
        },
    )
}

/// SIGHUP: reads the web configuration again. A bad file keeps the old one
/// (the exporter goes on serving as before), said in the log.
fn reload(shared: &Shared) {
    let Some(path) = shared.config().source.clone() else {
        log(
            Priority::Warning,
            "zprof serve: SIGHUP: there is no --web.config.file to re-read; still serving",
        );
        return;
    };
    service::notify(&format!(
        "RELOADING=1\nMONOTONIC_USEC={}",
        service::monotonic_usec()
    ));
    match WebConfig::load(&path) {
        Ok(config) => {
            let said = config.describe();
            shared.replace_config(config);
            log(
                Priority::Info,
                &format!("zprof serve: SIGHUP: re-read {}: {said}", path.display()),
            );
        }
        Err(err) => log(
            Priority::Warning,
            &format!("zprof serve: SIGHUP: {err:#}; the previous configuration stays"),
        ),
    }
    service::notify("READY=1");
}

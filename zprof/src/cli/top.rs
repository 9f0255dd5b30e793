//! `zprof top`: a live terminal view of the stages, refreshed every interval
//! like `zpool iostat 1`, but by stage: operations per second, p50 and p99 of
//! the last interval, and the time in the stage per second (1.00: one thread
//! in it all the time). Keys switch the pool, the sort order, and a panel with
//! the current top finding (explain over the last ten seconds). It reads the
//! same in-kernel aggregates as `serve`, and detaches on q, Esc, Ctrl-C or
//! SIGTERM.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::{
    analyze::live::{SortKey, ViewRow, dirty_levels, interval, sort, view_rows},
    cli::args::TopArgs,
    collect::session::Session,
    recording::HistRecord,
    render::top::{ViewState, draw},
};

/// The finding panel's window: explain needs more than one second.
const FINDING_WINDOW: usize = 10;

/// Set by the SIGTERM handler; the loop ends at its next turn.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    TERMINATED.store(true, Ordering::Relaxed);
}

/// Runs the view until a quit key or SIGTERM; returns the exit status.
pub fn top(args: TopArgs) -> anyhow::Result<i32> {
    let session = crate::cli::serve::attach_everywhere(&args.attach)?;
    // SAFETY: the handler only stores to an atomic.
    unsafe { libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t) };
    let mut terminal = ratatui::init();
    let result = run(&mut terminal, session, args.interval);
    ratatui::restore();
    // The session was dropped inside run: every probe is detached by now.
    result.map(|()| 0)
}

fn run(
    terminal: &mut ratatui::DefaultTerminal,
    mut session: Session,
    interval: Duration,
) -> anyhow::Result<()> {
    let (keys_tx, keys) = mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(event) = event::read() {
            if keys_tx.send(event).is_err() {
                break;
            }
        }
    });
    let release = session.release();
    let mut state = ViewState {
        sort: SortKey::Time,
        pool: None,
        pools: Vec::new(),
        show_finding: false,
        finding: None,
        dirty: Vec::new(),
        dirty_data_max: None,
        heading: format!(
            "zprof top: OpenZFS {} ({}), {} of {} probe points",
            release.version.as_deref().unwrap_or("of unknown release"),
            release.status.word(),
            session.probes().iter().filter(|p| p.attached).count(),
            session.probes().len()
        ),
    };
    // Cumulative snapshots, newest last: the interval is the last two.
    let mut history: VecDeque<(Instant, Vec<HistRecord>)> = VecDeque::new();
    history.push_back((Instant::now(), session.live_rows()?));
    let mut rows = Vec::new();
    let mut next_refresh = Instant::now() + interval;
    while !TERMINATED.load(Ordering::Relaxed) {
        if Instant::now() >= next_refresh {
            next_refresh += interval;
            history.push_back((Instant::now(), session.live_rows()?));
            if history.len() > FINDING_WINDOW + 1 {
                history.pop_front();
            }
            rows = refresh(&session, &history, &mut state);
            state.dirty_data_max = session.tunables_now().get("zfs_dirty_data_max").copied();
        }
        let mut shown: Vec<ViewRow> = rows
            .iter()
            .filter(|r: &&ViewRow| state.pool.as_ref().is_none_or(|p| &r.pool == p))
            .cloned()
            .collect();
        sort(&mut shown, state.sort);
        terminal.draw(|frame| draw(frame, &state, &shown, interval))?;
        let wait = next_refresh
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        match keys.recv_timeout(wait) {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => match key.code {
                KeyCode::Char('q') | KeyCode::Esc => break,
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => break,
                KeyCode::Char('s') => state.sort = state.sort.next(),
                KeyCode::Char('p') => {
                    state.next_pool();
                    rows = refresh(&session, &history, &mut state);
                }
                KeyCode::Char('f') => {
                    state.show_finding = !state.show_finding;
                    rows = refresh(&session, &history, &mut state);
                }
                _ => {}
            },
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(session);
    Ok(())
}

/// The last interval's rows; the pools seen; the finding when it is shown.
fn refresh(
    session: &Session,
    history: &VecDeque<(Instant, Vec<HistRecord>)>,
    state: &mut ViewState,
) -> Vec<ViewRow> {
    let (Some((t0, before)), Some((t1, now))) = (history.iter().rev().nth(1), history.back())
    else {
        return Vec::new();
    };
    let last = interval(before, now);
    state.dirty = dirty_levels(&last);
    let rows = view_rows(&last, (*t1 - *t0).as_secs_f64());
    for pool in rows.iter().map(|r| &r.pool).filter(|p| !p.is_empty()) {
        if !state.pools.contains(pool) {
            state.pools.push(pool.clone());
            state.pools.sort();
        }
    }
    state.finding = state.show_finding.then(|| {
        let (start, first) = history.front().expect("not empty");
        let seconds = (*t1 - *start).as_secs_f64();
        // The pool shown, and the rows of no pool (compression, checksums).
        let rows = interval(first, now).into_iter().filter(|h| h.pool.is_empty() || state.pool.as_ref().is_none_or(|p| &h.pool == p)).collect();
        let recording = session.interval_recording(rows, seconds);
        let findings = crate::analyze::findings::explain(&recording, &crate::analyze::findings::ExplainOptions::default());
        match findings.first() {
            Some(f) => format!(
                "top finding over the last {seconds:.0} s: {} [{}] ({:.0}% of the workload's time)\n{}",
                f.title,
                f.pool,
                f.share * 100.0,
                f.evidence.first().map(String::as_str).unwrap_or("")
            ),
            None => format!("no finding over the last {seconds:.0} s"),
        }
    });
    rows
}

//! `zprof top`: a live terminal view of the stages, refreshed every interval
//! like `zpool iostat 1`, but by stage: operations per second, p50 and p99 of
//! the last interval, and the time in the stage per second (1.00: one thread
//! in it all the time). Keys switch the pool, the sort order, and a panel with
//! the current top finding (explain over the last ten seconds). It reads the
//! same in-kernel aggregates as `serve`, and detaches on q, Esc, Ctrl-C or
//! SIGTERM.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use ratatui::{
    crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    layout::{Constraint, Layout},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Paragraph, Row, Table, Wrap},
};
use zprof_common::{HIST_BUCKETS, hist_bucket_high};

use crate::{
    cli::TopArgs,
    recording::HistRecord,
    report::{format_count, format_ns},
    tracer::{COUNT_ONLY, Session},
};

/// The finding panel's window: explain needs more than one second.
const FINDING_WINDOW: usize = 10;

/// One line of the view: a stage's events in the last interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewRow {
    /// Stage name.
    pub stage: String,
    /// Pool ("" where the stage cannot tell).
    pub pool: String,
    /// The rows' class, without "count only".
    pub class: String,
    /// Events per second.
    pub ops_per_s: f64,
    /// p50 and p99 of the interval (upper bucket edges, ns); None when not timed.
    pub p50_ns: Option<u64>,
    /// See `p50_ns`.
    pub p99_ns: Option<u64>,
    /// Seconds in the stage per second.
    pub busy: f64,
}

/// The rows of `now` less those of `before` (cumulative maps), key by key.
pub fn interval(before: &[HistRecord], now: &[HistRecord]) -> Vec<HistRecord> {
    let key = |h: &HistRecord| (h.stage.clone(), h.class, h.pool.clone(), h.vdev);
    let earlier: BTreeMap<_, &HistRecord> = before.iter().map(|h| (key(h), h)).collect();
    now.iter()
        .map(|h| {
            let Some(old) = earlier.get(&key(h)) else {
                return h.clone();
            };
            let old_buckets: BTreeMap<u64, u64> =
                old.buckets.iter().map(|[i, n]| (*i, *n)).collect();
            HistRecord {
                count: h.count.saturating_sub(old.count),
                total_ns: h.total_ns.saturating_sub(old.total_ns),
                bytes: h.bytes.saturating_sub(old.bytes),
                bytes_out: h.bytes_out.saturating_sub(old.bytes_out),
                buckets: h
                    .buckets
                    .iter()
                    .map(|[i, n]| {
                        [
                            *i,
                            n.saturating_sub(old_buckets.get(i).copied().unwrap_or(0)),
                        ]
                    })
                    .filter(|[_, n]| *n > 0)
                    .collect(),
                ..h.clone()
            }
        })
        .filter(|h| h.count > 0)
        .collect()
}

/// The value below which a share `q` of the buckets' events fall (upper edge).
fn quantile(buckets: &BTreeMap<u64, u64>, q: f64) -> Option<u64> {
    let total: u64 = buckets.values().sum();
    let mut seen = 0;
    for (index, n) in buckets {
        seen += n;
        if seen as f64 >= q * total as f64 && total > 0 {
            return Some(hist_bucket_high((*index as usize).min(HIST_BUCKETS - 1)));
        }
    }
    None
}

/// The view's rows of an interval of `seconds`: leaves summed, one row per
/// stage, pool and class (reuse distances, which are bytes, left out).
pub fn view_rows(rows: &[HistRecord], seconds: f64) -> Vec<ViewRow> {
    /// One view row's sums before the rates.
    #[derive(Default)]
    struct Sums {
        count: u64,
        total_ns: u64,
        timed: bool,
        buckets: BTreeMap<u64, u64>,
    }
    let mut merged: BTreeMap<(String, String, String), Sums> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.stage != "arc_miss_reuse") {
        let class = row
            .class_name
            .trim_end_matches(COUNT_ONLY)
            .trim()
            .to_owned();
        let sums = merged
            .entry((row.stage.clone(), row.pool.clone(), class))
            .or_default();
        sums.count += row.count;
        sums.total_ns += row.total_ns;
        sums.timed |= !row.class_name.ends_with(COUNT_ONLY);
        for [index, n] in &row.buckets {
            *sums.buckets.entry(*index).or_default() += n;
        }
    }
    let seconds = seconds.max(1e-9);
    merged
        .into_iter()
        .map(|((stage, pool, class), s)| ViewRow {
            stage,
            pool,
            class,
            ops_per_s: s.count as f64 / seconds,
            p50_ns: s.timed.then(|| quantile(&s.buckets, 0.5)).flatten(),
            p99_ns: s.timed.then(|| quantile(&s.buckets, 0.99)).flatten(),
            busy: s.total_ns as f64 / 1e9 / seconds,
        })
        .collect()
}

/// What the rows are sorted by (the `s` key cycles through them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortKey {
    /// Time in the stage per second, highest first.
    Time,
    /// Operations per second, highest first.
    Ops,
    /// p99, highest first.
    P99,
    /// Stage name.
    Stage,
}

impl SortKey {
    fn next(self) -> SortKey {
        match self {
            SortKey::Time => SortKey::Ops,
            SortKey::Ops => SortKey::P99,
            SortKey::P99 => SortKey::Stage,
            SortKey::Stage => SortKey::Time,
        }
    }

    fn word(self) -> &'static str {
        match self {
            SortKey::Time => "time",
            SortKey::Ops => "ops/s",
            SortKey::P99 => "p99",
            SortKey::Stage => "stage",
        }
    }
}

/// Sorts the rows in place.
pub fn sort(rows: &mut [ViewRow], key: SortKey) {
    let by_name = |a: &ViewRow, b: &ViewRow| {
        (&a.stage, &a.pool, &a.class).cmp(&(&b.stage, &b.pool, &b.class))
    };
    rows.sort_by(|a, b| match key {
        SortKey::Time => b.busy.total_cmp(&a.busy).then_with(|| by_name(a, b)),
        SortKey::Ops => b
            .ops_per_s
            .total_cmp(&a.ops_per_s)
            .then_with(|| by_name(a, b)),
        SortKey::P99 => b.p99_ns.cmp(&a.p99_ns).then_with(|| by_name(a, b)),
        SortKey::Stage => by_name(a, b),
    });
}

/// What the screen shows, besides the rows.
struct ViewState {
    sort: SortKey,
    /// None: every pool.
    pool: Option<String>,
    pools: Vec<String>,
    show_finding: bool,
    finding: Option<String>,
    heading: String,
}

impl ViewState {
    fn next_pool(&mut self) {
        self.pool = match &self.pool {
            None => self.pools.first().cloned(),
            Some(current) => self
                .pools
                .iter()
                .skip_while(|p| *p != current)
                .nth(1)
                .cloned(),
        };
    }
}

/// Set by the SIGTERM handler; the loop ends at its next turn.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    TERMINATED.store(true, Ordering::Relaxed);
}

/// Runs the view until a quit key or SIGTERM; returns the exit status.
pub fn top(args: TopArgs) -> anyhow::Result<i32> {
    let session = crate::serve::attach_everywhere(&args.attach)?;
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
    let rows = view_rows(&interval(before, now), (*t1 - *t0).as_secs_f64());
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
        let findings = crate::explain::explain(&recording, &crate::explain::ExplainOptions::default());
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

fn draw(frame: &mut ratatui::Frame, state: &ViewState, rows: &[ViewRow], interval: Duration) {
    let finding_height = if state.show_finding { 5 } else { 0 };
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(finding_height),
    ])
    .areas(frame.area());
    let pool = state.pool.as_deref().unwrap_or("all");
    let heading = format!(
        "{}; every {:.1} s\npool: {pool}   sort: {}   keys: p pool, s sort, f finding, q quit",
        state.heading,
        interval.as_secs_f64(),
        state.sort.word()
    );
    frame.render_widget(Paragraph::new(heading), head);
    let time = |ns: Option<u64>| ns.map_or("-".to_owned(), format_ns);
    let lines: Vec<Row> = rows
        .iter()
        .map(|r| {
            Row::new(vec![
                r.stage.clone(),
                r.pool.clone(),
                r.class.clone(),
                format_count(r.ops_per_s),
                time(r.p50_ns),
                time(r.p99_ns),
                if r.p50_ns.is_some() {
                    format!("{:.2}", r.busy)
                } else {
                    "-".into()
                },
            ])
        })
        .collect();
    let widths = [16, 14, 22, 10, 10, 10, 8].map(Constraint::Length);
    let header = Row::new(["STAGE", "POOL", "CLASS", "OPS/S", "P50", "P99", "TIME/S"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    frame.render_widget(Table::new(lines, widths).header(header), body);
    if let Some(finding) = state.finding.as_deref().filter(|_| state.show_finding) {
        let text: Vec<Line> = finding.lines().map(Line::from).collect();
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title("finding")),
            foot,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;

    /// The guest's requests run (OpenZFS 2.1.11 in the kernel; see
    /// tests/data/README.md): real rows.
    fn captured() -> Recording {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/guest-2.1.11-requests.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn an_interval_is_the_difference_of_two_snapshots() {
        let rec = captured();
        let zero: Vec<HistRecord> = rec
            .histograms
            .iter()
            .map(|h| HistRecord {
                count: 0,
                total_ns: 0,
                bytes: 0,
                bytes_out: 0,
                buckets: vec![],
                ..h.clone()
            })
            .collect();
        // From nothing to the run: the run; from the run to itself: nothing.
        assert_eq!(
            interval(&zero, &rec.histograms),
            rec.histograms
                .iter()
                .filter(|h| h.count > 0)
                .cloned()
                .collect::<Vec<_>>()
        );
        assert!(interval(&rec.histograms, &rec.histograms).is_empty());
    }

    #[test]
    fn rows_give_rates_quantiles_and_time_per_second() {
        let rec = captured();
        let rows = view_rows(&rec.histograms, rec.duration_s);
        let commits = rows
            .iter()
            .find(|r| r.stage == "zil_commit")
            .expect("the capture has commits");
        let source: Vec<&HistRecord> = rec
            .histograms
            .iter()
            .filter(|h| h.stage == "zil_commit")
            .collect();
        let count: u64 = source.iter().map(|h| h.count).sum();
        let total: u64 = source.iter().map(|h| h.total_ns).sum();
        assert!((commits.ops_per_s - count as f64 / rec.duration_s).abs() < 1e-9);
        assert!((commits.busy - total as f64 / 1e9 / rec.duration_s).abs() < 1e-9);
        let (p50, p99) = (commits.p50_ns.unwrap(), commits.p99_ns.unwrap());
        assert!(
            p50 <= p99 && p99 <= source.iter().map(|h| h.max_ns).max().unwrap() * 2,
            "{p50} {p99}"
        );
    }

    #[test]
    fn keys_cycle_the_sort_and_the_pools() {
        let mut rows = view_rows(&captured().histograms, 10.0);
        sort(&mut rows, SortKey::Time);
        assert!(rows.windows(2).all(|w| w[0].busy >= w[1].busy));
        sort(&mut rows, SortKey::Ops);
        assert!(rows.windows(2).all(|w| w[0].ops_per_s >= w[1].ops_per_s));
        assert_eq!(SortKey::Stage.next(), SortKey::Time);
        let mut state = ViewState {
            sort: SortKey::Time,
            pool: None,
            pools: vec!["a".into(), "b".into()],
            show_finding: false,
            finding: None,
            heading: String::new(),
        };
        state.next_pool();
        assert_eq!(state.pool.as_deref(), Some("a"));
        state.next_pool();
        assert_eq!(state.pool.as_deref(), Some("b"));
        state.next_pool();
        assert_eq!(state.pool, None, "after the last pool: all");
    }
}

//! `zprof top`'s screen: a heading, the stage rows of the last interval, the
//! current top finding when asked for, and the keys.

use std::time::Duration;

use ratatui::{
    layout::{Constraint, Layout},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Paragraph, Row, Table, Wrap},
};

use crate::{
    analyze::live::{DirtyLevel, SortKey, ViewRow},
    units::{format_bytes, format_count, format_ns},
};

/// What the screen shows, besides the rows.
pub struct ViewState {
    /// The rows' order.
    pub sort: SortKey,
    /// The pool shown; None: every pool.
    pub pool: Option<String>,
    /// The pools seen so far, in the order the pool key cycles them.
    pub pools: Vec<String>,
    /// Whether the finding panel is open.
    pub show_finding: bool,
    /// The current top finding over the last seconds, in one line.
    pub finding: Option<String>,
    /// What is traced, for the heading.
    pub heading: String,
    /// Each pool's dirty level at txg sync over the last interval.
    pub dirty: Vec<DirtyLevel>,
    /// zfs_dirty_data_max as read from the traced ZFS.
    pub dirty_data_max: Option<f64>,
}

impl ViewState {
    /// Shows the next pool, then all of them after the last.
    pub fn next_pool(&mut self) {
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

/// Draws the heading, the rows, the finding panel (when shown) and the keys.
pub fn draw(frame: &mut ratatui::Frame, state: &ViewState, rows: &[ViewRow], interval: Duration) {
    let finding_height = if state.show_finding { 5 } else { 0 };
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(finding_height),
    ])
    .areas(frame.area());
    let pool = state.pool.as_deref().unwrap_or("all");
    let heading = format!(
        "{}; every {:.1} s\n{}\npool: {pool}   sort: {}   keys: p pool, s sort, f finding, q quit",
        state.heading,
        interval.as_secs_f64(),
        dirty_line(state),
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

/// The shown pools' dirty levels at the txg syncs of the last interval.
fn dirty_line(state: &ViewState) -> String {
    let shown: Vec<String> = state
        .dirty
        .iter()
        .filter(|d| state.pool.as_ref().is_none_or(|p| &d.pool == p))
        .map(|d| {
            let share = state
                .dirty_data_max
                .filter(|max| *max > 0.0)
                .map(|max| {
                    format!(
                        " ({:.0}% of zfs_dirty_data_max)",
                        100.0 * d.max_bytes as f64 / max
                    )
                })
                .unwrap_or_default();
            format!(
                "{} {} txg{}, up to {}{share}",
                d.pool,
                d.txgs,
                if d.txgs == 1 { "" } else { "s" },
                format_bytes(d.max_bytes as f64)
            )
        })
        .collect();
    if shown.is_empty() {
        "dirty at txg sync: no txg synced in the interval (or its dirty bytes are not read here)"
            .to_owned()
    } else {
        format!("dirty at txg sync (bucket edges): {}", shown.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_key_cycles_the_pools_then_all() {
        let mut state = ViewState {
            sort: SortKey::Time,
            pool: None,
            pools: vec!["a".into(), "b".into()],
            show_finding: false,
            finding: None,
            heading: String::new(),
            dirty: Vec::new(),
            dirty_data_max: None,
        };
        state.next_pool();
        assert_eq!(state.pool.as_deref(), Some("a"));
        state.next_pool();
        assert_eq!(state.pool.as_deref(), Some("b"));
        state.next_pool();
        assert_eq!(state.pool, None, "after the last pool: all");
    }

    #[test]
    fn the_dirty_line_names_each_shown_pool_against_the_limit() {
        let level = |pool: &str| DirtyLevel {
            pool: pool.into(),
            txgs: 3,
            p50_bytes: 16 << 20,
            max_bytes: 64 << 20,
        };
        let mut state = ViewState {
            sort: SortKey::Time,
            pool: None,
            pools: vec!["boot".into(), "tank".into()],
            show_finding: false,
            finding: None,
            heading: String::new(),
            dirty: vec![level("boot"), level("tank")],
            dirty_data_max: Some((256u64 << 20) as f64),
        };
        let line = dirty_line(&state);
        assert!(
            line.contains("boot 3 txgs, up to 64.0 MiB (25% of zfs_dirty_data_max)"),
            "{line}"
        );
        assert!(line.contains("tank"), "{line}");
        state.pool = Some("tank".into());
        assert!(!dirty_line(&state).contains("boot"));
        state.dirty.clear();
        assert!(dirty_line(&state).starts_with("dirty at txg sync: no txg synced"));
    }
}

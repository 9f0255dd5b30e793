//! The test ledger of `cargo xtask test`: one JSON line per attempt of a case
//! that may be tried again, per case this host cannot check and per case known
//! to miss, written by the integration tests (tests/tests/common/ledger.rs)
//! and by the guest rig; emptied before the run, summarised after it.
//!
//! A retry that passed, a skipped bound or an expected miss is then seen in
//! CI's log, not only in the stderr nextest hides for passing tests.

use std::{collections::BTreeMap, io::Write as _, path::PathBuf};

use serde_json::Value;

/// The ledger's path, as the tests find it (`ZPROF_TEST_LEDGER` is set for them).
pub fn path() -> PathBuf {
    std::env::var_os("ZPROF_TEST_LEDGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::target_dir().join("test-ledger.jsonl"))
}

/// Empties the ledger before a run.
pub fn reset() -> anyhow::Result<()> {
    let path = path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, "")?;
    Ok(())
}

/// Appends one line (`outcome`: pass, miss, cannot-check, expected-miss, unexpected-pass).
pub fn record(test: &str, case: &str, outcome: &str, detail: &str) {
    let line =
        serde_json::json!({ "test": test, "case": case, "outcome": outcome, "detail": detail });
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path())
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(err) = written {
        eprintln!(
            "xtask: cannot write the test ledger {}: {err}",
            path().display()
        );
    }
}

/// One case's lines.
#[derive(Default)]
struct CaseLines {
    outcomes: Vec<String>,
    details: Vec<String>,
}

/// The summary printed at the end of `cargo xtask test`: every case that was
/// retried, could not be checked here or is known to miss, with each attempt;
/// then the counts.
pub fn summary() -> String {
    let text = std::fs::read_to_string(path()).unwrap_or_default();
    let mut cases: BTreeMap<(String, String), CaseLines> = BTreeMap::new();
    let mut unreadable = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            unreadable += 1;
            continue;
        };
        let field = |k: &str| v[k].as_str().unwrap_or("?").to_owned();
        let entry = cases.entry((field("test"), field("case"))).or_default();
        entry.outcomes.push(field("outcome"));
        entry
            .details
            .push(format!("{}: {}", field("outcome"), field("detail")));
    }
    let mut out = format!("test ledger ({}):\n", path().display());
    let (mut clean, mut retried, mut unchecked, mut known, mut failed) = (0, 0, 0, 0, 0);
    for ((test, case), lines) in &cases {
        let has = |o: &str| lines.outcomes.iter().any(|x| x == o);
        let kind = if has("unexpected-pass")
            || (has("miss") && lines.outcomes.last().map(String::as_str) != Some("pass"))
        {
            failed += 1;
            "FAILED"
        } else if has("cannot-check") {
            unchecked += 1;
            "cannot be checked on this host"
        } else if has("expected-miss") {
            known += 1;
            "known to miss"
        } else if has("miss") {
            retried += 1;
            "passed after a miss"
        } else {
            clean += 1;
            continue;
        };
        out.push_str(&format!("  {test} | {case}: {kind}\n"));
        for detail in &lines.details {
            out.push_str(&format!("      {detail}\n"));
        }
    }
    out.push_str(&format!(
        "  {} cases: {clean} passed at the first attempt, {retried} passed after a miss, {unchecked} could not be checked on this host, {known} known to miss, {failed} failed",
        cases.len()
    ));
    if unreadable > 0 {
        out.push_str(&format!(", {unreadable} unreadable lines"));
    }
    out
}

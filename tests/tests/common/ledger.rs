//! The test ledger: every attempt of a case that may be tried again, every
//! case a host cannot check and every case known to miss, one JSON line each,
//! in the file `cargo xtask test` prints a summary of at the end.
//!
//! Why: nextest hides a passing test's stderr, so a retry that passed on its
//! second try, or a bound this host could not check, would otherwise look
//! like a clean pass. The ledger is `$ZPROF_TEST_LEDGER` (xtask sets it and
//! empties it before the run), else `target/test-ledger.jsonl`.

use std::io::Write as _;

/// What became of one attempt of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Within its bound.
    Pass,
    /// Outside its bound (a later attempt may still pass).
    Miss,
    /// This host cannot check the bound (the reason says why): neither pass nor fail.
    CannotCheck,
    /// A case marked as known to miss missed, as expected (the detail names the open work).
    ExpectedMiss,
    /// A case marked as known to miss passed: the mark must go, so the test fails.
    UnexpectedPass,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Miss => "miss",
            Outcome::CannotCheck => "cannot-check",
            Outcome::ExpectedMiss => "expected-miss",
            Outcome::UnexpectedPass => "unexpected-pass",
        }
    }
}

fn ledger_path() -> std::path::PathBuf {
    std::env::var_os("ZPROF_TEST_LEDGER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| super::target_dir().join("test-ledger.jsonl"))
}

/// Appends one line to the ledger and prints it (for `--no-capture` runs).
pub fn record(test: &str, case: &str, outcome: Outcome, detail: &str) {
    let line = serde_json::json!({ "test": test, "case": case, "outcome": outcome.name(), "detail": detail });
    eprintln!("ledger: {test} | {case} | {} | {detail}", outcome.name());
    let path = ledger_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // One write per line with O_APPEND: lines of tests run at once do not mix.
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("opening the test ledger");
    file.write_all(format!("{line}\n").as_bytes())
        .expect("writing the test ledger");
}

/// Says that this host cannot check `case` and why; the caller then skips it.
pub fn cannot_check(test: &str, case: &str, why: &str) {
    record(test, case, Outcome::CannotCheck, why);
}

/// The attempts of one case that may be tried up to `tries` times: each is
/// recorded, a pass ends them, and [`Attempts::verdict`] says whether the case
/// passed and lists every attempt.
pub struct Attempts {
    test: String,
    case: String,
    /// The known-miss mark: the open work that explains the miss.
    known_miss: Option<String>,
    tries: usize,
    details: Vec<String>,
    passed: bool,
}

impl Attempts {
    /// A case tried at most `tries` times.
    pub fn new(test: &str, case: &str, tries: usize) -> Attempts {
        Attempts {
            test: test.into(),
            case: case.into(),
            known_miss: None,
            tries,
            details: Vec::new(),
            passed: false,
        }
    }

    /// A case known to miss (`open_work` names the issue that will fix it):
    /// tried once; a miss is expected, a pass fails the test so the mark is removed.
    pub fn known_miss(test: &str, case: &str, open_work: &str) -> Attempts {
        Attempts {
            known_miss: Some(open_work.into()),
            ..Attempts::new(test, case, 1)
        }
    }

    /// Allows one more try (a host condition measured during a miss excuses it).
    pub fn one_more(&mut self) {
        self.tries += 1;
    }

    /// Whether another attempt is due.
    pub fn again(&self) -> bool {
        !self.passed && self.details.len() < self.tries
    }

    /// Records one attempt.
    pub fn attempt(&mut self, within: bool, detail: String) {
        let outcome = match (&self.known_miss, within) {
            (None, true) => Outcome::Pass,
            (None, false) => Outcome::Miss,
            (Some(_), false) => Outcome::ExpectedMiss,
            (Some(_), true) => Outcome::UnexpectedPass,
        };
        let shown = match &self.known_miss {
            Some(work) => format!("{detail} (known to miss: {work})"),
            None => detail.clone(),
        };
        record(
            &self.test,
            &self.case,
            outcome,
            &format!("attempt {}: {shown}", self.details.len() + 1),
        );
        self.passed = within;
        self.details.push(detail);
    }

    /// `Ok` when the case passed (or missed as known), or when no attempt
    /// was recorded (every try was one the host could not check, which the
    /// caller put in the ledger); else every attempt, for the failure message.
    pub fn verdict(&self) -> Result<(), String> {
        if self.details.is_empty() {
            return Ok(());
        }
        match (&self.known_miss, self.passed) {
            (None, true) | (Some(_), false) => Ok(()),
            (None, false) => Err(format!("{}: {}", self.case, self.details.join(", then "))),
            (Some(work), true) => Err(format!(
                "{}: marked as known to miss ({work}) but passed ({}): remove the mark",
                self.case,
                self.details.join(", then ")
            )),
        }
    }
}

//! The `zprof-lab` binary: parse the command line, run, print, exit.
//! Exit codes: 0 done, 1 runtime failure, 2 bad input, 3 a `--check` criterion
//! failed, 130 stopped by a signal.

use std::process::{Command as Process, Stdio};
use std::time::Duration;

use clap::Parser;
use zprof_lab::cli::{Cli, Command, OutputFormat, ScenarioArgs};
use zprof_lab::report::{AllReport, Report};
use zprof_lab::runner::{self, Plan, RunError};
use zprof_lab::scenario::{self, Scenario};
use zprof_lab::{lab, output};

/// Exit code when a `--check` criterion fails.
const EXIT_CHECK_FAILED: i32 = 3;
/// Exit code when none fails but one cannot be decided on this host (its
/// devices were slower than their models).
const EXIT_CHECK_HOST: i32 = 4;

/// The exit code of a run's checks.
fn checks_code(checks: &[zprof_lab::report::Check]) -> i32 {
    if checks.iter().any(|c| c.failed()) {
        EXIT_CHECK_FAILED
    } else if checks.iter().any(|c| c.host_limit.is_some()) {
        EXIT_CHECK_HOST
    } else {
        0
    }
}

fn text(report: &Report, scenario: Option<Scenario>) -> String {
    let mut s = output::report_text(report);
    if let Some(sc) = scenario {
        s.push('\n');
        s.push_str(&scenario::summary(sc, report));
        if !report.checks.is_empty() {
            s.push('\n');
            s.push_str(&scenario::checks_text(sc, &report.checks));
        }
    }
    s
}

fn print(report: &Report, format: OutputFormat, scenario: Option<Scenario>) {
    match format {
        OutputFormat::Json => match serde_json::to_string_pretty(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("zprof-lab: cannot serialise the report: {e}"),
        },
        OutputFormat::Normal => print!("{}", text(report, scenario)),
    }
}

fn run_plan(
    plan: &Plan,
    format: OutputFormat,
    progress: bool,
    scen: Option<Scenario>,
    check: bool,
) -> i32 {
    lab::install_signal_handlers();
    let progress = progress || format == OutputFormat::Normal;
    match runner::execute(plan, progress, |j| {
        if progress {
            eprintln!(
                "zprof-lab: job {} done ({} ms + {:.0} ms job-end sync)",
                j.jobname, j.runtime_ms, j.sync_ms
            );
        }
    }) {
        Ok(mut report) => {
            if let (Some(sc), true) = (scen, check) {
                report.checks = scenario::checks(sc, &report);
            }
            print(&report, format, scen);
            if report.interrupted {
                130
            } else {
                checks_code(&report.checks)
            }
        }
        Err(RunError::Input(e)) => {
            eprintln!("zprof-lab: {e}");
            2
        }
        Err(RunError::Runtime { error, partial }) => {
            print(&partial, format, scen);
            eprintln!("zprof-lab: {error:#}");
            1
        }
    }
}

/// `scenario all`: each scenario in a child process of this binary (a fresh
/// libzpool and ARC each, and one scenario's failure does not take the others
/// down), reports collected as JSON and printed here.
fn run_all(a: &ScenarioArgs) -> i32 {
    lab::install_signal_handlers();
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("zprof-lab: cannot find my own executable to run the scenarios: {e}");
            return 1;
        }
    };
    let mut all = AllReport {
        zprof_lab_version: env!("CARGO_PKG_VERSION").to_string(),
        scenarios: Vec::new(),
        interrupted: false,
    };
    let mut code = 0;
    for sc in Scenario::EACH {
        if lab::stop_requested() {
            break;
        }
        eprintln!("zprof-lab: scenario {} ...", sc.cli_name());
        let Some((child_code, out)) = run_child(&exe, a, sc) else {
            return 1;
        };
        match serde_json::from_slice::<Report>(&out) {
            Ok(r) => all.scenarios.push(r),
            Err(e) => {
                eprintln!(
                    "zprof-lab: scenario {} printed no report (exit {child_code}): {e}",
                    sc.cli_name()
                );
                code = code.max(1);
            }
        }
        if child_code == 130 {
            all.interrupted = true;
            break;
        }
        code = merged_code(code, child_code, sc);
    }
    all.interrupted |= lab::stop_requested();
    print_all(&all, a);
    if all.interrupted { 130 } else { code }
}

/// Runs scenario `sc` in a child process, forwarding a Ctrl-C/SIGTERM to it;
/// its exit code (1 if unknown) and what it printed on stdout. None: it
/// could not be started (said on stderr).
fn run_child(exe: &std::path::Path, a: &ScenarioArgs, sc: Scenario) -> Option<(i32, Vec<u8>)> {
    let child = Process::new(exe)
        .args(a.child_args(sc))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zprof-lab: cannot start scenario {}: {e}", sc.cli_name());
            return None;
        }
    };
    // Read stdout on a thread (a report can exceed a pipe buffer) while this
    // thread forwards a Ctrl-C/SIGTERM to the child.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(e) => {
                eprintln!("zprof-lab: waiting for scenario {}: {e}", sc.cli_name());
                break None;
            }
        }
        if lab::stop_requested() && !forwarded {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let child_code = status.and_then(|s| s.code()).unwrap_or(1);
    let out = reader.join().ok().and_then(|r| r.ok()).unwrap_or_default();
    Some((child_code, out))
}

/// The exit code of `all` so far after a child's (not 130: that stops the
/// run): a failure outranks an undecided check, which outranks a pass.
fn merged_code(code: i32, child_code: i32, sc: Scenario) -> i32 {
    match child_code {
        0 => code,
        EXIT_CHECK_FAILED if code == 0 || code == EXIT_CHECK_HOST => EXIT_CHECK_FAILED,
        EXIT_CHECK_HOST if code == 0 => EXIT_CHECK_HOST,
        EXIT_CHECK_FAILED | EXIT_CHECK_HOST => code,
        other => {
            eprintln!(
                "zprof-lab: scenario {} failed (exit {other})",
                sc.cli_name()
            );
            1
        }
    }
}

/// Prints `all`'s reports: one JSON document, or each scenario's text and
/// (with --check) the verdict over all of them.
fn print_all(all: &AllReport, a: &ScenarioArgs) {
    match a.common.output_format {
        OutputFormat::Json => match serde_json::to_string_pretty(all) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("zprof-lab: cannot serialise the report: {e}"),
        },
        OutputFormat::Normal => {
            for r in &all.scenarios {
                let sc = r.scenario.as_deref().and_then(Scenario::from_report_name);
                println!(
                    "===== scenario {} =====",
                    sc.map(|s| s.cli_name()).unwrap_or("?")
                );
                print!("{}", text(r, sc));
                println!();
            }
            if a.check {
                let verdict =
                    scenario::verdict_line(all.scenarios.iter().flat_map(|r| r.checks.iter()));
                let missing = Scenario::EACH.len() - all.scenarios.len();
                let missing = if missing > 0 {
                    format!("; FAIL: {missing} scenario(s) printed no report")
                } else {
                    String::new()
                };
                println!(
                    "check all: {verdict} in {} scenario(s){missing}",
                    all.scenarios.len()
                );
            }
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Run(r) => match r.plan() {
            Ok(p) => run_plan(&p, r.common.output_format, false, None, false),
            Err(e) => {
                eprintln!("zprof-lab: {e}");
                2
            }
        },
        Command::Scenario(s) if s.name == Scenario::All => run_all(s),
        Command::Scenario(s) => run_plan(
            &scenario::plan(&s.options(), s.name),
            s.common.output_format,
            s.progress,
            Some(s.name),
            s.check,
        ),
    };
    std::process::exit(code);
}

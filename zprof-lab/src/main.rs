//! The `zprof-lab` binary: parse the command line, run, print, exit.
//! Exit codes: 0 done, 1 runtime failure, 2 bad input, 130 stopped by a signal.

use clap::Parser;
use zprof_lab::cli::{Cli, Command, OutputFormat};
use zprof_lab::report::Report;
use zprof_lab::runner::{self, RunError};
use zprof_lab::{lab, output, scenario};

fn print(report: &Report, format: OutputFormat, scenario: Option<scenario::Scenario>) {
    match format {
        OutputFormat::Json => match serde_json::to_string_pretty(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("zprof-lab: cannot serialise the report: {e}"),
        },
        OutputFormat::Normal => {
            print!("{}", output::report_text(report));
            if let Some(s) = scenario {
                print!("\n{}", scenario::summary(s, report));
            }
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let (plan, format, scen) = match &cli.command {
        Command::Run(r) => match r.plan() {
            Ok(p) => (p, r.common.output_format, None),
            Err(e) => {
                eprintln!("zprof-lab: {e}");
                std::process::exit(2);
            }
        },
        Command::Scenario(s) => (scenario::plan(s), s.common.output_format, Some(s.name)),
    };
    lab::install_signal_handlers();
    let code = match runner::execute(&plan, format == OutputFormat::Normal, |j| {
        if format == OutputFormat::Normal {
            eprintln!("zprof-lab: job {} done ({} ms)", j.jobname, j.runtime_ms);
        }
    }) {
        Ok(report) => {
            print(&report, format, scen);
            if report.interrupted { 130 } else { 0 }
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
    };
    std::process::exit(code);
}

//! Dispatching a parsed command line to its subcommand, and the exit status
//! of an error.
//!
//! Exit statuses: 0 on success; the traced command's own status for `record --
//! CMD` (128 + signal when it was killed); 2 for bad input or a machine that
//! cannot trace (nothing is attached in that case); 1 for other failures.

use crate::cli::args::Cli;
use crate::cli::args::Command;
use crate::collect::session::CannotTrace;
use crate::recording::RecordingError;
use crate::zfs::target::TargetError;

pub use super::common::UsageError;

/// The exit status for an error.
pub fn exit_code_for(err: &anyhow::Error) -> i32 {
    let is_input_error = err.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause.is::<CannotTrace>()
            || cause.is::<TargetError>()
            || cause.is::<RecordingError>()
    });
    if is_input_error { 2 } else { 1 }
}

/// Runs a parsed command line; returns the exit status.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Probes(args) => super::probes::probes(args),
        Command::Offsets(args) => super::offsets::offsets_cmd(args),
        Command::Serve(args) => crate::cli::serve::serve(args),
        Command::Top(args) => crate::cli::top::top(args),
        Command::Record(args) => super::record::record(args, false),
        Command::Run(args) => super::record::record(args, true),
        Command::Report(args) => super::report::report_cmd(args),
        Command::Explain(args) => super::explain::explain_cmd(args),
        Command::Compare(args) => super::compare::compare_cmd(args),
        Command::Flamegraph(args) => super::flamegraph::flamegraph_cmd(args),
        Command::Generate(args) => super::generate::generate(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;

    #[test]
    fn input_errors_exit_2() {
        let err: anyhow::Error = UsageError("no process with pid 1".into()).into();
        assert_eq!(exit_code_for(&err), 2);
        let err = anyhow::Error::new(TargetError::NotPrivileged("CAP_BPF".into()))
            .context("while starting");
        assert_eq!(exit_code_for(&err), 2);
        assert_eq!(exit_code_for(&anyhow!("bpf load failed")), 1);
    }
}

//! `zprof record` and `zprof run`: attach, run the command or wait, detach,
//! and print the report, the benchmark's result and the findings.

use super::{
    child::{Tee, collect, is_running, process_state, spawn_gated},
    common::{UsageError, check_writable, prepare},
    explain::explain_recording,
    flamegraph::{check_profile_path, write_flamegraph},
    report::print_all,
};
use crate::cli::args::RecordArgs;
use crate::collect::session::Session;
use crate::collect::session::SessionOptions;
use crate::recording::Recording;
use crate::zfs::target;

/// `record` and `run`: `run` also captures the command's output to read the
/// benchmark's own result from it.
pub(super) fn record(args: RecordArgs, run_mode: bool) -> anyhow::Result<i32> {
    check_before_attaching(&args, run_mode)?;
    let traced = target::Traced {
        command: (!args.command.is_empty()).then_some(args.command.as_slice()),
        pid: args.pid,
    };
    let (target, found) = prepare(&args.target, &traced)?;
    let mut session = Session::start(target, found, &session_options(&args))?;
    let attached = session.probes().iter().filter(|p| p.attached).count();
    let mut child = None;
    let mut tee = None;
    let mut released = None;
    if !args.command.is_empty() {
        let gated = spawn_gated(&args.command, run_mode || args.quiet_command)?;
        session.track_pid(gated.pid)?;
        let (pid, stdout) = gated.release()?;
        released = Some(std::time::Instant::now());
        child = Some(pid);
        tee = stdout.map(|out| Tee::start(out, !args.quiet_command));
    }
    let pid = child.or(args.pid);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let command_exit = runtime.block_on(async {
        collect(&mut session, child, args.pid, args.duration, attached).await
    })?;
    let wall_s = released.map(|at| at.elapsed().as_secs_f64());

    let command = (!args.command.is_empty()).then(|| args.command.clone());
    // finish() consumes the session: the probes are detached when it returns,
    // before anything is written or printed.
    let mut recording = session.finish(command, command_exit, pid)?;
    if let Some(tee) = tee {
        let output = tee.finish();
        // `record --quiet-command` captures only to keep the output out of the way.
        if run_mode {
            recording.benchmark = crate::recording::result::parse(&output);
            if recording.benchmark.is_none() {
                eprintln!(
                    "zprof: the command's output is not fio or zprof-lab JSON nor pgbench's report: its result is its wall time (fio: add --output-format=json)"
                );
                recording.benchmark = Some(crate::recording::result::command_result(
                    &args.command,
                    wall_s.unwrap_or(recording.duration_s),
                    &recording,
                ));
            }
        }
    }
    let failed = !write_outputs(&args, &recording);
    let findings = (!args.no_explain).then(|| explain_recording(&recording, &args.what_if));
    print_all(&recording, findings.as_deref(), args.format, args.by.into())?;
    let status = command_exit.unwrap_or(0);
    Ok(if failed && status == 0 { 1 } else { status })
}

/// What is refused before anything is attached: `run` without a command, a
/// pid that is not running, output paths that could not be written at the
/// end (a recording must not be lost at the end of a long run for want of a
/// writable path).
fn check_before_attaching(args: &RecordArgs, run_mode: bool) -> anyhow::Result<()> {
    if run_mode && args.command.is_empty() {
        // Its point is the benchmark's own result beside the stages.
        return Err(UsageError(
            "zprof run needs the benchmark to run after --; record traces without one".into(),
        )
        .into());
    }
    if let Some(pid) = args.pid
        && !is_running(pid)
    {
        let what = if process_state(pid).is_some() {
            "has exited (a zombie)"
        } else {
            "does not exist"
        };
        return Err(UsageError(format!(
            "process {pid} {what}: give the pid of a running process"
        ))
        .into());
    }
    if let Some(path) = &args.output {
        check_writable(path)?;
    }
    if let Some(path) = &args.flamegraph {
        check_profile_path(path)?;
    }
    Ok(())
}

/// The session's options from the command line: a command zprof starts is
/// filtered by the pid it will get (tracked once forked), a pid as given.
fn session_options(args: &RecordArgs) -> SessionOptions {
    let filter = if !args.command.is_empty() {
        Some(Vec::new())
    } else {
        args.pid.map(|p| vec![p])
    };
    SessionOptions {
        filter_pids: filter,
        hist_entries: args.hist_entries,
        sample_hz: args.sample_freq,
        stack_entries: args.stack_storage_size,
        full_timing: args.full_timing,
        skip: args.skip.clone(),
        off_cpu: args.off_cpu,
        slower_than: args.slower_than,
        request_rows: args.request_rows,
    }
}

/// Writes the recording and the flame graph asked for; false if one failed.
/// A write that fails now (disk full, path removed during the run) loses
/// nothing: the recording goes to a fallback file, the report is still
/// printed, and the exit status says something failed.
fn write_outputs(args: &RecordArgs, recording: &Recording) -> bool {
    let mut written = true;
    if let Some(path) = &args.output
        && let Err(err) = recording.save(path)
    {
        written = false;
        let fallback =
            std::env::temp_dir().join(format!("zprof-recording-{}.json", std::process::id()));
        let saved = recording
            .save(&fallback)
            .map(|()| format!("saved to {} instead", fallback.display()));
        eprintln!(
            "zprof: error: cannot write {}: {err}; recording {}",
            path.display(),
            saved.unwrap_or_else(|e| format!("not saved either ({e})"))
        );
    } else if let Some(path) = &args.output {
        eprintln!("recording written to {}", path.display());
    }
    if let Some(path) = &args.flamegraph
        && let Err(err) = write_flamegraph(recording, args.flamegraph_kind.into(), path, &[])
    {
        written = false;
        eprintln!("zprof: error: flame graph: {err:#}");
    }
    written
}

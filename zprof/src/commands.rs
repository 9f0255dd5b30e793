//! The subcommands: `probes`, `record`, `report`.
//!
//! Exit statuses: 0 on success; the traced command's own status for `record --
//! CMD` (128 + signal when it was killed); 2 for bad input or a machine that
//! cannot trace (nothing is attached in that case); 1 for other failures.

use std::{
    io::Write as _,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow};

use crate::{
    cli::{Cli, Command, Format, OffsetsArgs, ProbesArgs, RecordArgs, ReportArgs, TargetArgs},
    offsets::{self, FoundOffsets},
    recording::{Recording, RecordingError},
    report,
    target::{self, SystemPaths, Target, TargetError, TargetKind},
    tracer::{Session, SessionOptions},
};

/// Bad input that is the user's to fix (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit status for an error.
pub fn exit_code_for(err: &anyhow::Error) -> i32 {
    let is_input_error = err.chain().any(|cause| {
        cause.is::<UsageError>() || cause.is::<TargetError>() || cause.is::<RecordingError>()
    });
    if is_input_error { 2 } else { 1 }
}

/// Runs a parsed command line; returns the exit status.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Probes(args) => probes(args),
        Command::Offsets(args) => offsets_cmd(args),
        Command::Serve(args) => crate::serve::serve(args),
        Command::Top(args) => crate::top::top(args),
        Command::Record(args) => record(args, false),
        Command::Run(args) => record(args, true),
        Command::Report(args) => report_cmd(args),
        Command::Explain(args) => explain_cmd(args),
        Command::Compare(args) => compare_cmd(args),
        Command::Flamegraph(args) => {
            check_flamegraph_path(&args.output)?;
            let recording = Recording::load(&args.file)?;
            let recording = match &args.pool {
                Some(pool) => only_pool(recording, args.kind, pool)?,
                None => recording,
            };
            write_flamegraph(&recording, args.kind, &args.output, &args.process)?;
            Ok(0)
        }
    }
}

/// Resolves the target and its struct offsets.
pub(crate) fn prepare(
    args: &TargetArgs,
    traced: &target::Traced,
) -> anyhow::Result<(Target, FoundOffsets)> {
    let mut target = target::resolve(&args.target, &SystemPaths::default(), traced)?;
    if let Some(version) = &args.zfs_version {
        let known = target
            .build_id
            .as_deref()
            .and_then(offsets::release_of_build);
        if let Some(known) = known.as_ref().filter(|k| *k != version) {
            return Err(UsageError(format!(
                "--zfs-version {version} contradicts the build: its build-id is OpenZFS {known}'s; leave --zfs-version out"
            ))
            .into());
        }
        // Given for a build its build-id names already: nothing changes.
        target.zfs_version_given = known.is_none();
        target.zfs_version = Some(version.clone());
    }
    let found = match target.kind {
        TargetKind::Libzpool => {
            offsets::for_libzpool(target.build_id.as_deref(), args.offsets.as_deref())
                .map_err(UsageError)?
        }
        TargetKind::Kernel => offsets::for_kernel(&offsets::KernelSources {
            module_btf: "/sys/kernel/btf/zfs".as_ref(),
            vmlinux_btf: "/sys/kernel/btf/vmlinux".as_ref(),
            table: args.offsets.as_deref(),
            build_id: target.build_id.as_deref(),
            zfs_version: target.zfs_version.as_deref(),
            kernel_release: &crate::kernel_offsets::kernel_release(),
        })
        .map_err(UsageError)?,
    };
    Ok((target, found))
}

/// `zprof offsets`: compiles the table for a module build and stores it.
fn offsets_cmd(args: OffsetsArgs) -> anyhow::Result<i32> {
    use crate::kernel_offsets::{self as ko, BuildInputs};
    let module_dir = std::path::Path::new("/sys/module/zfs");
    let (build_id, release, version) = match &args.module {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| UsageError(format!("cannot read --module {}: {e}", path.display())))?;
            if !bytes.starts_with(b"\x7fELF") {
                return Err(UsageError(format!(
                    "--module {} is not an ELF file: give a zfs.ko",
                    path.display()
                ))
                .into());
            }
            (
                crate::elf::build_id(&bytes),
                ko::module_kernel_release(&bytes).unwrap_or_default(),
                None,
            )
        }
        None if module_dir.exists() => (
            ko::loaded_module_build_id(module_dir),
            ko::kernel_release(),
            ko::loaded_module_version(module_dir),
        ),
        None => {
            return Err(UsageError(
                "no zfs module is loaded: pass --module FILE (a zfs.ko) to make a table for it"
                    .into(),
            )
            .into());
        }
    };
    let inputs = match args.zfs_build {
        Some(tree) => BuildInputs::for_tree(tree, args.kernel_build, &release),
        None => BuildInputs::locate(version.as_deref(), args.kernel_build, &release),
    }
    .map_err(UsageError)?;
    let table = ko::compile(&inputs, build_id.as_deref()).map_err(UsageError)?;
    let path = match (&args.output, &build_id) {
        (Some(path), _) => path.clone(),
        (None, Some(id)) => ko::cache_path(id),
        (None, None) => {
            return Err(UsageError(
                "the module has no build-id to cache its table by: pass -o FILE".into(),
            )
            .into());
        }
    };
    ko::store(&table, &path).map_err(UsageError)?;
    println!(
        "{}: {} offsets of OpenZFS {} for zfs.ko build {} ({})",
        path.display(),
        table.offsets.len(),
        table.zfs_version,
        build_id.as_deref().unwrap_or("without a build-id"),
        table.source
    );
    Ok(0)
}

fn probes(args: ProbesArgs) -> anyhow::Result<i32> {
    let (target, found) = prepare(&args.target, &target::Traced::default())?;
    let object = target.object.clone();
    // Attaching for real is the only honest answer to "does it attach here".
    let session = Session::start(
        target,
        found.clone(),
        &SessionOptions {
            filter_pids: None,
            hist_entries: 64,
            sample_hz: 0,
            stack_entries: Some(64),
            full_timing: false,
            skip: Vec::new(),
            off_cpu: false,
            slower_than: None,
            request_rows: 64,
        },
    )?;
    let statuses = session.probes().to_vec();
    let release = session.release().clone();
    drop(session);
    if args.format == Format::Json {
        let doc = serde_json::json!({
            "object": object,
            "zfs_version": release.version,
            "zfs_series": release.series.map(|s| s.name),
            "zfs_status": release.status.word(),
            "zfs_status_detail": release.status.to_string(),
            "offsets": found.source,
            "offset_values": found.values,
            "probes": statuses,
            "groups_absent": absent_groups(&statuses),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(0);
    }
    println!("target: {object}");
    println!("OpenZFS {}: {}", release.version_text(), release.status);
    if let Some(series) = release.series {
        println!(
            "interpreted with the {} series' rules ({}):",
            series.name, series.source
        );
        for behaviour in series.behaviours {
            println!("  - {behaviour}");
        }
    }
    println!("offsets: {}", found.source);
    let absent = absent_groups(&statuses);
    for (group, description) in crate::catalogue::GROUPS {
        println!("\n{group}: {description}");
        if let Some(why) = absent.get(*group) {
            println!("  none on this target: {why}");
        }
        for p in statuses.iter().filter(|p| p.group == *group) {
            let kind = if p.returns { "entry+return" } else { "entry" };
            match &p.reason {
                None => println!(
                    "  {:<22} {:<13} attached{}",
                    p.function,
                    kind,
                    p.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
                Some(reason) => println!("  {:<22} {:<13} no: {reason}", p.function, kind),
            }
        }
    }
    Ok(0)
}

/// Stage groups with no probe point on the target of `statuses`, and why.
fn absent_groups(
    statuses: &[crate::recording::ProbeStatus],
) -> std::collections::BTreeMap<&'static str, &'static str> {
    crate::catalogue::ABSENT_ON_LIBZPOOL
        .iter()
        .filter(|(group, _)| !statuses.iter().any(|p| p.group == *group))
        .copied()
        .collect()
}

/// A command started by zprof, held at a gate until released.
struct GatedChild {
    pid: u32,
    gate: std::fs::File,
    exec_errors: std::fs::File,
    program: String,
    /// Read end of the command's stdout, when it is captured (`zprof run`).
    stdout: Option<std::fs::File>,
}

/// Forks `command` and holds it before exec until [`release`] is called, so the
/// probes know its pid before it runs a single instruction of libzpool.
/// (std's `Command::spawn` cannot do this: it waits for the exec to happen.)
fn spawn_gated(command: &[String], capture_stdout: bool) -> anyhow::Result<GatedChild> {
    use std::{ffi::CString, os::fd::FromRawFd as _};
    let args: Vec<CString> = command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| UsageError("the command contains a NUL byte".into()))?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut gate = [0i32; 2];
    let mut errors = [0i32; 2];
    let mut output = [-1i32; 2];
    unsafe {
        if libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::pipe2(errors.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || (capture_stdout && libc::pipe2(output.as_mut_ptr(), libc::O_CLOEXEC) != 0)
        {
            return Err(std::io::Error::last_os_error()).context("creating pipes");
        }
    }
    let parent = unsafe { libc::getpid() };
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // Child: only async-signal-safe calls from here to exec.
        unsafe {
            // If zprof dies (SIGKILL, a crash), the command is told to stop
            // rather than run on untraced. This thread (main) lives as long
            // as zprof; the check closes the race with a death before prctl.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                libc::_exit(125);
            }
            // EOF instead of the gate byte: zprof gave up or died before the
            // probes were in place, so the command must not run at all.
            let mut byte = 0u8;
            if libc::read(gate[0], &mut byte as *mut u8 as *mut libc::c_void, 1) != 1 {
                libc::_exit(125);
            }
            if output[1] >= 0 {
                // dup2 clears close-on-exec on the new descriptor.
                libc::dup2(output[1], 1);
            }
            libc::execvp(argv[0], argv.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(errors[1], &errno as *const i32 as *const libc::c_void, 4);
            libc::_exit(127);
        }
    }
    unsafe {
        libc::close(gate[0]);
        libc::close(errors[1]);
        if output[1] >= 0 {
            libc::close(output[1]);
        }
    }
    Ok(GatedChild {
        pid: pid as u32,
        gate: unsafe { std::fs::File::from_raw_fd(gate[1]) },
        exec_errors: unsafe { std::fs::File::from_raw_fd(errors[0]) },
        program: command[0].clone(),
        stdout: (output[0] >= 0).then(|| unsafe { std::fs::File::from_raw_fd(output[0]) }),
    })
}

impl GatedChild {
    /// Lets the command exec; fails (and reaps it) if the exec itself failed.
    /// Returns the pid and the captured stdout, if any.
    fn release(mut self) -> anyhow::Result<(u32, Option<std::fs::File>)> {
        use std::io::Read as _;
        self.gate.write_all(b"g").context("releasing the command")?;
        drop(self.gate);
        let mut errno = [0u8; 4];
        // EOF (0 bytes) means exec succeeded: the pipe closed on exec.
        let n = self.exec_errors.read(&mut errno).unwrap_or(0);
        if n == 4 {
            let mut status = 0;
            unsafe { libc::waitpid(self.pid as i32, &mut status, 0) };
            let err = std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno));
            return Err(UsageError(format!("cannot run '{}': {err}", self.program)).into());
        }
        Ok((self.pid, self.stdout))
    }
}

/// How much of a command's output `run` keeps to look for its benchmark
/// result (fio's JSON for hundreds of jobs is a few MiB).
const MAX_CAPTURED_OUTPUT: usize = 16 << 20;

/// Copies a command's stdout to ours as it comes, keeping a copy to parse.
struct Tee {
    buffer: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Tee {
    /// Starts copying; `echo` false keeps the output out of zprof's stdout.
    fn start(mut source: std::fs::File, echo: bool) -> Tee {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, done) = std::sync::mpsc::channel();
        let shared = buffer.clone();
        std::thread::spawn(move || {
            use std::io::Read as _;
            let mut chunk = [0u8; 65536];
            loop {
                match source.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if echo {
                            let _ = std::io::stdout().lock().write_all(&chunk[..n]);
                        }
                        // A benchmark's JSON is small: past the cap the output
                        // is still passed through (or drained), not kept.
                        let mut kept = shared.lock().unwrap_or_else(|e| e.into_inner());
                        let room = MAX_CAPTURED_OUTPUT.saturating_sub(kept.len());
                        kept.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
            let _ = tx.send(());
        });
        Tee { buffer, done }
    }

    /// What the command printed. Waits a little for the end of its output: a
    /// process it left running in the background may hold the pipe open.
    fn finish(self) -> String {
        let _ = self.done.recv_timeout(Duration::from_secs(5));
        let bytes = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()));
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Waits for a child and returns its exit code (128 + signal when killed).
fn wait_child(pid: u32) -> Option<i32> {
    let mut status = 0;
    loop {
        let r = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        if r == pid as i32 {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

/// A process's state letter from /proc/PID/stat, if the process exists.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether `pid` exists and has not exited: a zombie's /proc entry stays until
/// its parent reaps it, but it runs no more ZFS calls.
fn is_running(pid: u32) -> bool {
    process_state(pid).is_some_and(|state| !matches!(state, 'Z' | 'X'))
}

/// `record` and `run`: `run` also captures the command's output to read the
/// benchmark's own result from it.
fn record(args: RecordArgs, run_mode: bool) -> anyhow::Result<i32> {
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
    // Output paths are checked before anything runs: a recording must not be
    // lost at the end of a long run for want of a writable path.
    if let Some(path) = &args.output {
        check_writable(path)?;
    }
    if let Some(path) = &args.flamegraph {
        check_flamegraph_path(path)?;
    }
    let traced = target::Traced {
        command: (!args.command.is_empty()).then_some(args.command.as_slice()),
        pid: args.pid,
    };
    let (target, found) = prepare(&args.target, &traced)?;
    let filter = if !args.command.is_empty() {
        Some(Vec::new())
    } else {
        args.pid.map(|p| vec![p])
    };
    let mut session = Session::start(
        target,
        found,
        &SessionOptions {
            filter_pids: filter,
            hist_entries: args.hist_entries,
            sample_hz: args.sample_freq,
            stack_entries: args.stack_storage_size,
            full_timing: args.full_timing,
            skip: args.skip.clone(),
            off_cpu: args.off_cpu,
            slower_than: args.slower_than,
            request_rows: args.request_rows,
        },
    )?;
    let attached = session.probes().iter().filter(|p| p.attached).count();
    let mut child = None;
    let mut tee = None;
    if !args.command.is_empty() {
        let gated = spawn_gated(&args.command, run_mode || args.quiet_command)?;
        session.track_pid(gated.pid)?;
        let (pid, stdout) = gated.release()?;
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

    let command = (!args.command.is_empty()).then(|| args.command.clone());
    // finish() consumes the session: the probes are detached when it returns,
    // before anything is written or printed.
    let mut recording = session.finish(command, command_exit, pid)?;
    if let Some(tee) = tee {
        let output = tee.finish();
        // `record --quiet-command` captures only to keep the output out of the way.
        if run_mode {
            recording.benchmark = crate::bench::parse(&output);
            if recording.benchmark.is_none() {
                eprintln!(
                    "zprof: the command's output is not fio or zprof-lab JSON; showing zprof's measurements only (fio: add --output-format=json)"
                );
            }
        }
    }
    // A write that fails now (disk full, path removed during the run) loses
    // nothing: the recording goes to a fallback file, the report is printed,
    // and the exit status says something failed.
    let mut failed = false;
    if let Some(path) = &args.output {
        match recording.save(path) {
            Ok(()) => eprintln!("recording written to {}", path.display()),
            Err(err) => {
                failed = true;
                let fallback = std::env::temp_dir()
                    .join(format!("zprof-recording-{}.json", std::process::id()));
                let saved = recording
                    .save(&fallback)
                    .map(|()| format!("saved to {} instead", fallback.display()));
                eprintln!(
                    "zprof: error: cannot write {}: {err}; recording {}",
                    path.display(),
                    saved.unwrap_or_else(|e| format!("not saved either ({e})"))
                );
            }
        }
    }
    if let Some(path) = &args.flamegraph
        && let Err(err) = write_flamegraph(&recording, args.flamegraph_kind, path, &[])
    {
        failed = true;
        eprintln!("zprof: error: flame graph: {err:#}");
    }
    let findings = (!args.no_explain).then(|| explain_recording(&recording, &args.what_if));
    print_all(&recording, findings.as_deref(), args.format, args.by)?;
    let status = command_exit.unwrap_or(0);
    Ok(if failed && status == 0 { 1 } else { status })
}

/// An output path zprof will write at the end of a run: not a directory, in
/// an existing directory, writable.
fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let shown = path.display();
    if path.is_dir() {
        return Err(UsageError(format!(
            "cannot write {shown}: it is a directory (give a file name)"
        ))
        .into());
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "cannot write {shown}: directory {} does not exist",
            dir.display()
        ))
        .into());
    }
    let writable = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
        // SAFETY: access() only reads the NUL-terminated path.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    };
    let target = if path.exists() { path } else { dir };
    // access() answers for root too where it matters: a read-only mount (EROFS).
    if !writable(target) {
        return Err(UsageError(format!(
            "cannot write {shown}: {} is not writable",
            target.display()
        ))
        .into());
    }
    Ok(())
}

/// A flame graph's path: named for what it will hold, and writable.
fn check_flamegraph_path(path: &std::path::Path) -> anyhow::Result<()> {
    if !matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("svg" | "folded")
    ) {
        return Err(UsageError(format!(
            "cannot write a flame graph to {}: name it .svg (a flame graph) or .folded (folded stacks)",
            path.display()
        ))
        .into());
    }
    check_writable(path)
}

/// Writes a flame graph: folded stacks for a `.folded` path, SVG otherwise.
/// Writes a flame graph (of the `processes` named only, when any are).
fn write_flamegraph(
    recording: &Recording,
    kind: crate::cli::FlameKind,
    path: &std::path::Path,
    processes: &[String],
) -> anyhow::Result<()> {
    use crate::{cli::FlameKind, flamegraph};
    let all = flamegraph::stacks_of(recording, kind).map_err(UsageError)?;
    let all_lines = all.clone();
    let lines = only_processes(all, kind, processes)?;
    let text = if path.extension().is_some_and(|e| e == "folded") {
        lines.join("\n") + "\n"
    } else {
        let mut titles = flamegraph::titles(recording, kind);
        if !processes.is_empty() {
            let weight = |l: &[String]| {
                flamegraph::parse_folded(l)
                    .unwrap_or_default()
                    .iter()
                    .map(|(_, w)| w)
                    .sum::<u64>()
            };
            let amount = |w: u64| match kind {
                FlameKind::Cpu => format!("{w} samples"),
                _ => crate::report::format_ns(w * 1_000),
            };
            titles.subtitle = format!(
                "processes {} only: {} of the recording's {}; {}",
                processes.join(", "),
                amount(weight(&lines)),
                amount(weight(&all_lines)),
                titles.subtitle
            );
        }
        flamegraph::render_svg(&lines, &titles)?
    };
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "flame graph written to {} ({})",
        path.display(),
        flamegraph::describe(&lines, kind != FlameKind::Cpu)
    );
    Ok(())
}

/// The folded stacks whose process (first frame) is one of `processes`; all
/// of them when none is named.
fn only_processes(
    lines: Vec<String>,
    kind: crate::cli::FlameKind,
    processes: &[String],
) -> anyhow::Result<Vec<String>> {
    if processes.is_empty() {
        return Ok(lines);
    }
    if kind == crate::cli::FlameKind::Stages {
        return Err(UsageError(
            "--process applies to the cpu and off-cpu kinds: stage time is not kept per process"
                .into(),
        )
        .into());
    }
    // The wall-clock view's root is the kind of time; the process comes next.
    let skip = usize::from(kind == crate::cli::FlameKind::Wall);
    let process_of = |line: &str| line.split(';').nth(skip).unwrap_or("").to_owned();
    let kept: Vec<String> = lines
        .iter()
        .filter(|l| processes.contains(&process_of(l)))
        .cloned()
        .collect();
    if kept.is_empty() {
        let mut names: Vec<String> = lines.iter().map(|l| process_of(l)).collect();
        names.sort();
        names.dedup();
        return Err(UsageError(format!(
            "no stacks of {} in the recording; its processes: {}",
            processes.join(", "),
            names.join(", ")
        ))
        .into());
    }
    Ok(kept)
}

fn explain_recording(
    recording: &Recording,
    what_if: &[crate::explain::WhatIf],
) -> Vec<crate::explain::Finding> {
    use crate::explain::WhatIf;
    let slogs = what_if.iter().filter_map(|w| {
        if let WhatIf::Slog(d) = w {
            Some(*d)
        } else {
            None
        }
    });
    let options = crate::explain::ExplainOptions {
        slogs: slogs
            .enumerate()
            .map(|(i, d)| (format!("what-if #{}", i + 1), d))
            .collect(),
        caches: what_if
            .iter()
            .filter_map(|w| {
                if let WhatIf::Cache(c) = w {
                    Some(*c)
                } else {
                    None
                }
            })
            .collect(),
        ..Default::default()
    };
    crate::explain::explain(recording, &options)
}

/// Prints the report, then the benchmark's result and the findings.
fn print_all(
    recording: &Recording,
    findings: Option<&[crate::explain::Finding]>,
    format: Format,
    by: crate::requests::GroupBy,
) -> anyhow::Result<()> {
    let built = report::build(recording, by);
    let text = match format {
        Format::Table => {
            let mut text = report::render_table(&built);
            if let Some(findings) = findings {
                text.push('\n');
                text.push_str(&crate::explain::render(
                    findings,
                    recording.benchmark.as_ref(),
                ));
            }
            text
        }
        Format::Json => {
            serde_json::to_string_pretty(&serde_json::json!({
                "report": built,
                "benchmark": recording.benchmark,
                "findings": findings,
            }))? + "\n"
        }
    };
    write_stdout(&text)
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        // A closed pipe (zprof report | head) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| anyhow!(e)),
    }
}

fn explain_cmd(args: crate::cli::ExplainArgs) -> anyhow::Result<i32> {
    let recording = Recording::load(&args.file)?;
    let findings = explain_recording(&recording, &args.what_if);
    let text = match args.format {
        Format::Table => crate::explain::render(&findings, recording.benchmark.as_ref()),
        Format::Json => serde_json::to_string_pretty(&findings)? + "\n",
    };
    write_stdout(&text)?;
    Ok(0)
}

/// The recording with only one pool's histograms (for the stage graph).
fn only_pool(
    mut recording: Recording,
    kind: crate::cli::FlameKind,
    pool: &str,
) -> anyhow::Result<Recording> {
    if kind != crate::cli::FlameKind::Stages {
        return Err(UsageError(
            "--pool applies to the stages kind: CPU and off-CPU stacks are not kept per pool"
                .into(),
        )
        .into());
    }
    let mut pools: Vec<String> = recording
        .histograms
        .iter()
        .map(|h| h.pool.clone())
        .filter(|p| !p.is_empty())
        .collect();
    pools.sort();
    pools.dedup();
    if !pools.iter().any(|p| p == pool) {
        return Err(UsageError(format!(
            "no pool {pool} in the recording; its pools: {}",
            pools.join(", ")
        ))
        .into());
    }
    recording.histograms.retain(|h| h.pool == pool);
    Ok(recording)
}

fn compare_cmd(args: crate::cli::CompareArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.flamegraph {
        check_flamegraph_path(path)?;
    }
    let a = Recording::load(&args.a)?;
    let b = Recording::load(&args.b)?;
    if let Some(path) = &args.flamegraph {
        let diff =
            crate::flamegraph::differential(&a, &b, args.flamegraph_kind).map_err(UsageError)?;
        let text = if path.extension().is_some_and(|e| e == "folded") {
            diff.lines.join("\n") + "\n"
        } else {
            crate::flamegraph::render_svg(&diff.lines, &diff.titles)?
        };
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "differential flame graph written to {} ({})",
            path.display(),
            diff.titles.subtitle
        );
    }
    let comparison = crate::compare::compare(
        &a,
        &b,
        (args.a.display().to_string(), args.b.display().to_string()),
    );
    let text = match args.format {
        Format::Table => crate::compare::render(&comparison),
        Format::Json => serde_json::to_string_pretty(&comparison)? + "\n",
    };
    write_stdout(&text)?;
    Ok(0)
}

/// Ticks the timeline each second until the command or pid ends, the duration
/// passes, or a signal arrives. Returns the command's exit status if it ended.
async fn collect(
    session: &mut Session,
    child: Option<u32>,
    watched_pid: Option<u32>,
    duration: Option<Duration>,
    attached: usize,
) -> anyhow::Result<Option<i32>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    // Only now that Ctrl-C and SIGTERM are handled (detach cleanly, report).
    eprintln!("Tracing {attached} probe points... Hit Ctrl-C to end.");
    let child_pid = child;
    let (exit_tx, mut exit_rx) = tokio::sync::oneshot::channel();
    if let Some(pid) = child {
        std::thread::spawn(move || {
            let _ = exit_tx.send(wait_child(pid));
        });
    }
    let deadline = duration.map(|d| Instant::now() + d);
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    // A command that ends within the first drain period still needs its map.
    let mut early_maps_ticker = tokio::time::interval(Duration::from_millis(20));
    let early_maps_until = Instant::now() + Duration::from_secs(1);
    let mut command_exit = None;
    let mut stop = None;
    loop {
        let until_deadline = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        tokio::select! {
            _ = early_maps_ticker.tick(), if Instant::now() < early_maps_until => session.refresh_traced_maps(),
            _ = ticker.tick() => {
                session.tick()?;
                if let Some(pid) = watched_pid
                    && !is_running(pid)
                {
                    break;
                }
            }
            status = &mut exit_rx, if child_pid.is_some() && command_exit.is_none() => {
                command_exit = status.ok().flatten();
                break;
            }
            _ = tokio::time::sleep(until_deadline.unwrap_or(Duration::MAX)), if until_deadline.is_some() => {
                stop = Some(Stop::Deadline);
                break;
            }
            _ = interrupt.recv() => { stop = Some(Stop::Interrupt); break; }
            _ = terminate.recv() => { stop = Some(Stop::Terminate); break; }
        }
    }
    if let (Some(stop), Some(pid)) = (stop, child_pid)
        && command_exit.is_none()
    {
        command_exit = stop_command(pid, stop, &mut exit_rx).await;
    }
    Ok(command_exit)
}

/// Why zprof stopped before the command it ran.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// `--duration` ran out.
    Deadline,
    /// SIGINT: from the terminal (the command got it too) or sent to zprof alone.
    Interrupt,
    /// SIGTERM, sent to zprof alone.
    Terminate,
}

/// Ends the command zprof ran, so that it never runs on untraced: passes the
/// signal on (after a grace period for SIGINT, which the terminal already
/// delivered to the whole process group), waits up to 30 s for its own
/// cleanup (the lab exports its pool), sends it again (the lab then abandons
/// a stuck pool and removes its files), then kills it. Returns its status.
async fn stop_command(
    pid: u32,
    stop: Stop,
    exit_rx: &mut tokio::sync::oneshot::Receiver<Option<i32>>,
) -> Option<i32> {
    let mut wait = async |limit: Duration| {
        tokio::time::timeout(limit, &mut *exit_rx)
            .await
            .ok()
            .map(|s| s.ok().flatten())
    };
    let signal = match stop {
        Stop::Interrupt => match wait(Duration::from_secs(2)).await {
            Some(status) => return status,
            None => libc::SIGINT,
        },
        Stop::Terminate | Stop::Deadline => libc::SIGTERM,
    };
    let why = if stop == Stop::Deadline {
        "the duration is over"
    } else {
        "zprof was stopped"
    };
    eprintln!(
        "stopping: {why}; sent {} to the command (pid {pid}), waiting up to 30 s for it to exit",
        signal_name(signal)
    );
    // SAFETY: kill() on the pid of our own child, which we have not reaped.
    unsafe { libc::kill(pid as i32, signal) };
    if let Some(status) = wait(Duration::from_secs(30)).await {
        return status;
    }
    // A second signal: the lab (and many tools) then stop at once, cleaning up.
    eprintln!(
        "stopping: the command did not exit in 30 s; sent {} again",
        signal_name(signal)
    );
    unsafe { libc::kill(pid as i32, signal) };
    if let Some(status) = wait(Duration::from_secs(5)).await {
        return status;
    }
    eprintln!("stopping: the command did not exit; killed it (SIGKILL)");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait(Duration::from_secs(5)).await.flatten()
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

fn print_report(
    recording: &Recording,
    format: Format,
    by: crate::requests::GroupBy,
) -> anyhow::Result<()> {
    let built = report::build(recording, by);
    let text = match format {
        Format::Table => report::render_table(&built),
        Format::Json => serde_json::to_string_pretty(&built)? + "\n",
    };
    write_stdout(&text)
}

fn report_cmd(args: ReportArgs) -> anyhow::Result<i32> {
    let recording = Recording::load(&args.file)?;
    print_report(&recording, args.format, args.by)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_not_a_running_process() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: wait until it has exited and is a zombie.
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_state(pid) != Some('Z') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(process_state(pid), Some('Z'));
        assert!(!is_running(pid));
        child.wait().unwrap();
        assert!(process_state(pid).is_none());
        assert!(is_running(std::process::id()));
    }

    #[test]
    fn input_errors_exit_2() {
        let err: anyhow::Error = UsageError("no process with pid 1".into()).into();
        assert_eq!(exit_code_for(&err), 2);
        let err = anyhow::Error::new(TargetError::NotPrivileged).context("while starting");
        assert_eq!(exit_code_for(&err), 2);
        assert_eq!(exit_code_for(&anyhow!("bpf load failed")), 1);
    }
}

//! The command zprof runs and traces: started held at a gate until the
//! probes know its pid, its output teed for `run`, watched until it ends, and
//! ended with it when zprof stops first, so it never runs untraced.

use super::common::UsageError;
use crate::collect::session::Session;
use anyhow::Context as _;
use std::io::Write as _;
use std::time::Duration;
use std::time::Instant;

/// A command started by zprof, held at a gate until released.
pub(super) struct GatedChild {
    pub(super) pid: u32,
    gate: std::fs::File,
    exec_errors: std::fs::File,
    program: String,
    /// Read end of the command's stdout, when it is captured (`zprof run`).
    stdout: Option<std::fs::File>,
}

/// Forks `command` and holds it before exec until [`release`] is called, so the
/// probes know its pid before it runs a single instruction of libzpool.
/// (std's `Command::spawn` cannot do this: it waits for the exec to happen.)
pub(super) fn spawn_gated(command: &[String], capture_stdout: bool) -> anyhow::Result<GatedChild> {
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
    pub(super) fn release(mut self) -> anyhow::Result<(u32, Option<std::fs::File>)> {
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
pub(super) const MAX_CAPTURED_OUTPUT: usize = 16 << 20;

/// Copies a command's stdout to ours as it comes, keeping a copy to parse.
pub(super) struct Tee {
    buffer: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Tee {
    /// Starts copying; `echo` false keeps the output out of zprof's stdout.
    pub(super) fn start(mut source: std::fs::File, echo: bool) -> Tee {
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
    pub(super) fn finish(self) -> String {
        let _ = self.done.recv_timeout(Duration::from_secs(5));
        let bytes = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()));
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Waits for a child and returns its exit code (128 + signal when killed).
pub(super) fn wait_child(pid: u32) -> Option<i32> {
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
pub(super) fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether `pid` exists and has not exited: a zombie's /proc entry stays until
/// its parent reaps it, but it runs no more ZFS calls.
pub(super) fn is_running(pid: u32) -> bool {
    process_state(pid).is_some_and(|state| !matches!(state, 'Z' | 'X'))
}

/// Ticks the timeline each second until the command or pid ends, the duration
/// passes, or a signal arrives. Returns the command's exit status if it ended.
pub(super) async fn collect(
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
pub(super) enum Stop {
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
pub(super) async fn stop_command(
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

pub(super) fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
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
}

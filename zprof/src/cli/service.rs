//! What a long-running zprof (`serve`) owes its service manager: log lines
//! in the journal's conventions, and readiness told to systemd.
//!
//! - Each event is one line on stderr. When stderr is the journal (systemd
//!   sets JOURNAL_STREAM to its device and inode), the line starts with its
//!   syslog priority, `<6>` for information, `<4>` for a warning, which
//!   journald takes off and keeps as the entry's priority; on a terminal or
//!   in a file the line is plain.
//! - With `Type=notify` (zprof-serve.service), READY=1 goes to
//!   NOTIFY_SOCKET once every probe is attached and the port listens, so
//!   `systemctl start` returns when scrapes can be answered, STOPPING=1
//!   when a signal starts the detach, and RELOADING=1 then READY=1 around
//!   the re-read of the web configuration on SIGHUP (`systemctl reload`).

use std::os::unix::net::UnixDatagram;

/// A log line's syslog priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Something went wrong for one request or event; zprof goes on.
    Warning = 4,
    /// Attached, listening, stopping.
    Info = 6,
}

/// Writes one event line to stderr, with its priority where stderr is the
/// journal.
pub fn log(priority: Priority, line: &str) {
    if stderr_is_journal() {
        eprintln!("<{}>{line}", priority as u8);
    } else {
        eprintln!("{line}");
    }
}

/// Whether stderr is the journal stream systemd connected (JOURNAL_STREAM is
/// inherited by children whose stderr may be elsewhere: the device and
/// inode must match).
fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct we own.
    if unsafe { libc::fstat(2, &mut stat) } != 0 {
        return false;
    }
    stream.to_string_lossy() == format!("{}:{}", stat.st_dev, stat.st_ino)
}

/// Sends `state` (READY=1, STOPPING=1) to systemd when it asked for it
/// (NOTIFY_SOCKET); a failure is logged, never fatal.
pub fn notify(state: &str) {
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET") {
        let socket = socket.to_string_lossy().into_owned();
        if let Err(err) = notify_to(&socket, state) {
            log(
                Priority::Warning,
                &format!("zprof serve: cannot tell systemd {state} on {socket}: {err}"),
            );
        }
    }
}

/// CLOCK_MONOTONIC in microseconds, which systemd wants beside RELOADING=1
/// to tell this reload from an earlier one.
pub fn monotonic_usec() -> u64 {
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime fills the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1_000
}

/// Sends `state` to the datagram socket `socket` (a path, or `@name` for an
/// abstract socket).
fn notify_to(socket: &str, state: &str) -> std::io::Result<usize> {
    let datagram = UnixDatagram::unbound()?;
    match socket.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt as _;
            let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            datagram.send_to_addr(state.as_bytes(), &address)
        }
        None => datagram.send_to(state.as_bytes(), socket),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_reaches_a_notify_socket_of_either_kind() {
        let dir = std::env::temp_dir().join(format!("zprof-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        notify_to(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("zprof-notify-{}", std::process::id());
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_receiver = UnixDatagram::bind_addr(&address).unwrap();
        notify_to(&format!("@{name}"), "STOPPING=1").unwrap();
        let n = abstract_receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

//! Where the fields zprof's tracepoint programs read lie in this kernel's
//! records. Record layouts differ between kernels, so they are read from
//! tracefs at start-up and handed to the programs as load-time constants
//! (see [`crate::collect::load`]), and only for the tracepoints a session uses.

use anyhow::anyhow;

use crate::collect::options::CannotTrace;

/// Field offsets in the records of the tracepoints a session uses (0 where
/// the session does not use the tracepoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TracepointOffsets {
    /// task:task_newtask's `pid` and `clone_flags`: the pid filter follows forks.
    pub newtask: (u32, u32),
    /// sched:sched_switch's `prev_state` and `next_pid`: off-CPU time.
    pub switch: (u32, u32),
}

impl TracepointOffsets {
    /// Reads the formats a session needs: task_newtask with a pid filter,
    /// sched_switch with off-CPU time.
    pub fn read(filter: bool, off_cpu: bool) -> anyhow::Result<TracepointOffsets> {
        Ok(TracepointOffsets {
            newtask: if filter { newtask_offsets()? } else { (0, 0) },
            switch: if off_cpu { switch_offsets()? } else { (0, 0) },
        })
    }
}

/// A tracepoint's format file (record layouts differ between kernels).
fn tracepoint_format(category: &str, name: &str) -> anyhow::Result<String> {
    let candidates = [
        format!("/sys/kernel/tracing/events/{category}/{name}/format"),
        format!("/sys/kernel/debug/tracing/events/{category}/{name}/format"),
    ];
    for path in &candidates {
        match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            // tracefs is root's: without the capability this is not a missing mount.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(anyhow::Error::new(CannotTrace(format!(
                    "permission denied reading {path}: tracefs is root's; run zprof as root, \
                     or add CAP_DAC_READ_SEARCH to its CAP_BPF and CAP_PERFMON"
                ))));
            }
            Err(_) => {}
        }
    }
    Err(anyhow!(
        "cannot read the {category}:{name} tracepoint format; mount tracefs (mount -t tracefs tracefs /sys/kernel/tracing)"
    ))
}

/// The offset of `field` (e.g. " pid;") in a tracepoint format's text.
fn field_offset(format: &str, field: &str) -> Option<u32> {
    format.lines().find(|l| l.contains(field)).and_then(|line| {
        line.split(';')
            .find_map(|f| f.trim().strip_prefix("offset:"))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Offsets of `pid` and `clone_flags` in task:task_newtask records.
fn newtask_offsets() -> anyhow::Result<(u32, u32)> {
    let text = tracepoint_format("task", "task_newtask")?;
    match (
        field_offset(&text, " pid;"),
        field_offset(&text, " clone_flags;"),
    ) {
        (Some(pid), Some(flags)) => Ok((pid, flags)),
        _ => Err(anyhow!(
            "unexpected task_newtask format: no pid or clone_flags field"
        )),
    }
}

/// Offsets of `prev_state` and `next_pid` in sched:sched_switch records.
fn switch_offsets() -> anyhow::Result<(u32, u32)> {
    let text = tracepoint_format("sched", "sched_switch")?;
    match (
        field_offset(&text, " prev_state;"),
        field_offset(&text, " next_pid;"),
    ) {
        (Some(state), Some(next)) => Ok((state, next)),
        _ => Err(anyhow!(
            "unexpected sched_switch format: no prev_state or next_pid field"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /sys/kernel/tracing/events/task/task_newtask/format of Linux 6.18.44,
    /// verbatim (tabs included).
    const NEWTASK_6_18: &str = "name: task_newtask\nID: 205\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\
        \tfield:u64 clone_flags;\toffset:32;\tsize:8;\tsigned:0;\n\
        \tfield:short oom_score_adj;\toffset:40;\tsize:2;\tsigned:1;\n\n\
        print fmt: \"pid=%d comm=%s clone_flags=%llx oom_score_adj=%hd\", REC->pid, REC->comm, REC->clone_flags, REC->oom_score_adj\n";

    #[test]
    fn the_child_pid_is_not_the_common_pid() {
        assert_eq!(field_offset(NEWTASK_6_18, " pid;"), Some(8));
        assert_eq!(field_offset(NEWTASK_6_18, " clone_flags;"), Some(32));
        assert_eq!(field_offset(NEWTASK_6_18, " next_pid;"), None);
    }
}

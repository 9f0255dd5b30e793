//! Probes through uprobe_multi links (Linux 6.6 and later) and kprobe_multi
//! links (5.18 and later, where the kernel has fprobe), which aya 0.14 cannot
//! create, so that detaching takes milliseconds instead of seconds.
//!
//! Why: a uprobe attached the classic way (a perf event per probe, which is what
//! aya does) is unregistered under the kernel's global `event_mutex`, and each
//! unregistration waits for an RCU-tasks-trace grace period: about 80 ms per
//! probe on Linux 6.18, 2.7 s for zprof's 34 uprobes, whether the links are
//! closed from one thread or many. A uprobe_multi link is released without
//! that mutex, so links closed from parallel threads share their grace
//! periods. Measured here (30 uprobes on libzpool, trivial program): perf-event
//! links 3.3 s closed one by one and 2.4 s in parallel; uprobe_multi links 1.6 s
//! one by one and 84 ms in parallel.
//!
//! Kprobes attached as perf events are likewise unregistered one by one, each
//! after an RCU grace period; a kprobe_multi link puts all of its functions
//! on ftrace at once and releases them together.
//!
//! The kernel only accepts a program in a uprobe_multi (kprobe_multi) link if
//! it was loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`
//! (`BPF_TRACE_KPROBE_MULTI`), and aya 0.14 loads probe programs without one.
//! So zprof loads these programs itself: aya still
//! parses the object and creates the maps (one set, shared by every program);
//! this module relocates a second copy of the same object against those maps'
//! descriptors with aya-obj, then issues BPF_PROG_LOAD and BPF_LINK_CREATE.
//! Where the kernel lacks them, the caller falls back to aya's probes.

use std::{
    collections::{HashMap, HashSet},
    ffi::CString,
    os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd},
    path::Path,
};

use anyhow::{Context as _, anyhow};
use aya::{Ebpf, maps::Map};
use aya_obj::{
    Object,
    generated::{
        bpf_attach_type::{self, BPF_TRACE_KPROBE_MULTI, BPF_TRACE_UPROBE_MULTI},
        bpf_cmd, bpf_prog_info,
        bpf_prog_type::BPF_PROG_TYPE_KPROBE,
    },
};

/// BPF_F_UPROBE_MULTI_RETURN and BPF_F_KPROBE_MULTI_RETURN: the link's
/// probes fire on return.
const MULTI_RETURN: u32 = 1;

/// The BPF_PROG_LOAD part of `union bpf_attr` that zprof sets (the kernel reads
/// the fields after it as zero when the given size ends here).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The BPF_LINK_CREATE part of `union bpf_attr` for a uprobe_multi link.
#[repr(C)]
#[derive(Default)]
struct UprobeMultiLinkAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    multi_flags: u32,
    pid: u32,
    pad: u32,
}

/// The BPF_LINK_CREATE part of `union bpf_attr` for a kprobe_multi link.
#[repr(C)]
#[derive(Default)]
struct KprobeMultiLinkAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    multi_flags: u32,
    cnt: u32,
    syms: u64,
    addrs: u64,
    cookies: u64,
}

/// A loaded program's counters, as the kernel keeps them.
pub struct ProgramStats {
    /// Runs (while BPF_ENABLE_STATS is on).
    pub run_count: u64,
    /// Their time, ns.
    pub run_time_ns: u64,
    /// Runs the kernel skipped (recursion_misses).
    pub missed: u64,
}

/// The counters of the program behind `fd` (BPF_OBJ_GET_INFO_BY_FD).
pub fn program_stats(fd: std::os::fd::BorrowedFd<'_>) -> Option<ProgramStats> {
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: size_of::<bpf_prog_info>() as u32,
        info: &mut info as *mut _ as u64,
    };
    sys_bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).ok()?;
    Some(ProgramStats {
        run_count: info.run_cnt,
        run_time_ns: info.run_time_ns,
        missed: info.recursion_misses,
    })
}

/// The BPF_OBJ_GET_INFO_BY_FD part of `union bpf_attr`.
#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

fn sys_bpf<T>(cmd: bpf_cmd, attr: &mut T) -> std::io::Result<i64> {
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_int,
            attr as *mut T,
            size_of::<T>() as u32,
        )
    };
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Whether an error from the first attempt means "this kernel has no multi
/// links of this kind", so that aya's classic probes should be used instead.
pub fn unsupported(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(|e| e.raw_os_error())
            .is_some_and(|code| {
                matches!(
                    code,
                    libc::EINVAL | libc::E2BIG | libc::EOPNOTSUPP | libc::ENOSYS | libc::EPERM
                )
            })
    })
}

/// zprof's probe programs, loaded for multi links of one kind, and their links.
pub struct MultiLinks {
    object: Object,
    attach_type: bpf_attach_type,
    programs: HashMap<String, OwnedFd>,
    links: Vec<OwnedFd>,
}

impl MultiLinks {
    /// Relocates a copy of `object` (the bytes `ebpf` was loaded from) against
    /// the maps aya created, so both copies of each program share them; its
    /// programs will be kprobe_multi ones for the kernel, else uprobe_multi.
    pub fn new(object_bytes: &[u8], ebpf: &Ebpf, kernel: bool) -> anyhow::Result<MultiLinks> {
        let mut object = Object::parse(object_bytes).context("parsing zprof's eBPF object")?;
        let definitions = std::mem::take(&mut object.maps);
        let mut maps = Vec::new();
        for (name, map) in ebpf.maps() {
            let definition = definitions
                .get(name)
                .ok_or_else(|| anyhow!("map {name} is not in the eBPF object"))?;
            maps.push((name, map_data_fd(name, map)?, definition));
        }
        let text_sections: HashSet<usize> = object
            .functions
            .keys()
            .map(|(section, _)| *section)
            .collect();
        object
            .relocate_maps(maps.into_iter(), &text_sections)
            .context("relocating maps")?;
        object
            .relocate_calls(&text_sections)
            .context("relocating calls")?;
        let attach_type = if kernel {
            BPF_TRACE_KPROBE_MULTI
        } else {
            BPF_TRACE_UPROBE_MULTI
        };
        Ok(MultiLinks {
            object,
            attach_type,
            programs: HashMap::new(),
            links: Vec::new(),
        })
    }

    /// Loads program `name` (once) with the links' attach type.
    fn program(&mut self, name: &str) -> anyhow::Result<std::os::fd::BorrowedFd<'_>> {
        if !self.programs.contains_key(name) {
            let program = self
                .object
                .programs
                .get(name)
                .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?;
            let function = self
                .object
                .functions
                .get(&program.function_key())
                .ok_or_else(|| anyhow!("program {name} has no code in the eBPF object"))?;
            let license = CString::new(self.object.license.as_bytes().to_vec())
                .unwrap_or_else(|_| c"GPL".into());
            let mut prog_name = [0u8; 16];
            // The kernel keeps 15 bytes of a program's name.
            for (slot, byte) in prog_name.iter_mut().zip(name.bytes().take(15)) {
                *slot = byte;
            }
            let mut attr = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_KPROBE as u32,
                insn_cnt: function.instructions.len() as u32,
                insns: function.instructions.as_ptr() as u64,
                license: license.as_ptr() as u64,
                prog_name,
                expected_attach_type: self.attach_type as u32,
                ..Default::default()
            };
            let fd = match sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => fd,
                Err(first) => {
                    // Load again with the verifier's log, for the error message.
                    let mut log = vec![0u8; 1 << 20];
                    attr.log_level = 1;
                    attr.log_size = log.len() as u32;
                    attr.log_buf = log.as_mut_ptr() as u64;
                    let _ = sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr);
                    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]).into_owned();
                    return Err(anyhow::Error::new(first).context(format!(
                        "loading {name} for {:?} links: {text}",
                        self.attach_type
                    )));
                }
            };
            self.programs
                .insert(name.to_owned(), unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        Ok(self.programs[name].as_fd())
    }

    /// Attaches program `name` at file offset `offset` of `object_path`, on
    /// entry or (with `on_return`) on return, in every process.
    pub fn attach(
        &mut self,
        name: &str,
        object_path: &Path,
        offset: u64,
        on_return: bool,
    ) -> anyhow::Result<()> {
        let prog_fd = self.program(name)?.as_raw_fd();
        let path = CString::new(object_path.as_os_str().as_encoded_bytes().to_vec())
            .map_err(|_| anyhow!("{} contains a NUL byte", object_path.display()))?;
        let offsets = [offset];
        let mut attr = UprobeMultiLinkAttr {
            prog_fd: prog_fd as u32,
            attach_type: BPF_TRACE_UPROBE_MULTI as u32,
            path: path.as_ptr() as u64,
            offsets: offsets.as_ptr() as u64,
            cnt: 1,
            multi_flags: if on_return { MULTI_RETURN } else { 0 },
            ..Default::default()
        };
        let fd = sys_bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr).with_context(|| {
            format!(
                "creating a uprobe_multi link for {name} at {}+{offset:#x}",
                object_path.display()
            )
        })?;
        self.links.push(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        Ok(())
    }

    /// Attaches program `name` to kernel function `function`, on entry or
    /// (with `on_return`) on return.
    pub fn attach_kprobe(
        &mut self,
        name: &str,
        function: &str,
        on_return: bool,
    ) -> anyhow::Result<()> {
        let prog_fd = self.program(name)?.as_raw_fd();
        let symbol =
            CString::new(function).map_err(|_| anyhow!("{function} contains a NUL byte"))?;
        let syms = [symbol.as_ptr() as u64];
        let mut attr = KprobeMultiLinkAttr {
            prog_fd: prog_fd as u32,
            attach_type: BPF_TRACE_KPROBE_MULTI as u32,
            multi_flags: if on_return { MULTI_RETURN } else { 0 },
            cnt: 1,
            syms: syms.as_ptr() as u64,
            ..Default::default()
        };
        let fd = sys_bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)
            .with_context(|| format!("creating a kprobe_multi link for {name} on {function}"))?;
        self.links.push(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        Ok(())
    }

    /// Run count and run time of program `name`, if it was loaded here (the
    /// kernel counts them while BPF_ENABLE_STATS is on).
    pub fn run_stats(&self, name: &str) -> Option<ProgramStats> {
        program_stats(self.programs.get(name)?.as_fd())
    }

    /// Whether a link was created: after one, an error is a real error, not a
    /// sign that the kernel lacks multi links.
    pub fn proven(&self) -> bool {
        !self.links.is_empty()
    }
}

impl Drop for MultiLinks {
    /// Detaches every link, closing them from parallel threads so that their
    /// RCU grace periods overlap; the programs are unloaded after.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        std::thread::scope(|scope| {
            for link in links {
                scope.spawn(move || drop(link));
            }
        });
    }
}

/// The descriptor of one of aya's maps, for relocation.
fn map_data_fd(name: &str, map: &Map) -> anyhow::Result<i32> {
    let data = match map {
        Map::Array(data)
        | Map::HashMap(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::RingBuf(data)
        | Map::StackTraceMap(data)
        | Map::PerfEventArray(data)
        | Map::ProgramArray(data)
        | Map::Queue(data)
        | Map::Stack(data)
        | Map::Unsupported(data) => data,
        _ => {
            return Err(anyhow!(
                "map {name}: a kind zprof's multi-link loader does not handle"
            ));
        }
    };
    Ok(data.fd().as_fd().as_raw_fd())
}

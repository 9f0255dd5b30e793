//! The load-time configuration of zprof's eBPF object, and its loading.
//!
//! What the programs must know of the traced build (kernel or user memory,
//! struct offsets, the release's semantics, the pid filter, tracepoint
//! layouts) is set as load-time constants (aya's `override_global`, bcc's
//! `const volatile`) rather than looked up per event, and map sizes are fixed
//! at load. [`LoadConfig::new`] decides all of it without touching the system,
//! so it is unit-tested; [`load`] applies it.

use anyhow::Context as _;
use aya::{Ebpf, EbpfLoader};
use zprof_common::{Config, Semantics};

use crate::{
    collect::{options::SessionOptions, stacks, tracepoints::TracepointOffsets},
    zfs::{
        offsets::FoundOffsets,
        releases,
        target::{Target, TargetKind},
    },
};

/// The eBPF object, built by build.rs from zprof-ebpf.
pub static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/zprof"));

/// Entries of the maps whose size a session chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapSizes {
    /// HIST (`--hist-entries`).
    pub hist: u32,
    /// Each generation of the CPU sample maps (CPU_STACKS_n, SAMPLES_n).
    pub samples: stacks::SampleMapSizes,
    /// Each generation of the off-CPU stack map (OFFCPU_STACKS_n).
    pub offcpu_stacks: u32,
    /// REQUESTS (`--request-rows`).
    pub requests: u32,
}

/// Everything set before the object is loaded, and what it was decided from.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// How the traced release is interpreted (its series gives the semantics).
    pub release: releases::Interpretation,
    /// The offsets as the programs get them: invalidated, with the reason in
    /// `source`, when the build's zio_t does not fit zprof's one-read copy.
    pub offsets: FoundOffsets,
    /// The CONFIG global.
    pub config: Config,
    /// Map sizes.
    pub maps: MapSizes,
}

impl LoadConfig {
    /// The configuration for tracing `target` with `offsets` as `options`
    /// ask, given the tracepoint layouts read and the number of online CPUs.
    pub fn new(
        target: &Target,
        offsets: FoundOffsets,
        options: &SessionOptions,
        tracepoints: TracepointOffsets,
        cpus: usize,
    ) -> LoadConfig {
        let kernel = target.kind == TargetKind::Kernel;
        let release = releases::interpret(target.zfs_version.as_deref(), kernel)
            .given_by_user(target.zfs_version_given);
        let (offsets, zio_read_len) = offsets_that_fit(offsets);
        let config = Config {
            kernel: kernel as u32,
            filter_tgid: options.filter_pids.is_some() as u32,
            newtask_pid_offset: tracepoints.newtask.0,
            newtask_flags_offset: tracepoints.newtask.1,
            zio_read_len,
            slow_request_us: options
                .slower_than
                .map_or(0, |d| d.as_micros().clamp(1, u32::MAX as u128) as u32),
            switch_prev_state_offset: tracepoints.switch.0,
            switch_next_pid_offset: tracepoints.switch.1,
            semantics: semantics(&release, kernel, &offsets),
            offsets: offsets.offsets,
            request: offsets.request,
        };
        LoadConfig {
            release,
            offsets,
            config,
            maps: map_sizes(options, cpus),
        }
    }

    /// What a report must say about this configuration: a release zprof has
    /// not verified, and what is lost without struct offsets.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !matches!(self.release.status, releases::Status::Verified(_)) {
            warnings.push(format!(
                "OpenZFS {}: {}",
                self.release.version_text(),
                self.release.status
            ));
        }
        if self.offsets.offsets.valid == 0 {
            warnings.push(format!(
                "no struct offsets ({}): vdev queue/disk split per priority and pool attribution are unavailable; vdev time falls back to vdev_queue_io..vdev_queue_io_done",
                self.offsets.source
            ));
        }
        warnings
    }
}

/// The offsets, and the bytes of a zio_t the leaf-I/O probes copy. A zio_t
/// layout zprof's one-read copy cannot hold is dropped: leaf I/Os are then
/// timed the way they are without offsets (the warnings say so).
fn offsets_that_fit(mut offsets: FoundOffsets) -> (FoundOffsets, u32) {
    let zio_read_len = offsets.offsets.zio_read_len();
    if zio_read_len <= zprof_common::ZIO_WINDOW {
        return (offsets, zio_read_len);
    }
    offsets.offsets.valid = 0;
    offsets.source = format!(
        "{}: zio_t fields lie beyond the {} bytes zprof copies per I/O",
        offsets.source,
        zprof_common::ZIO_WINDOW
    );
    (offsets, 0)
}

/// The release's semantics, with the build's own ZIO_FLAG_IO_BYPASS where
/// its BTF carries one (over the series').
fn semantics(
    release: &releases::Interpretation,
    kernel: bool,
    offsets: &FoundOffsets,
) -> Semantics {
    let mut semantics = release.semantics(kernel);
    if let Some(bit) = offsets
        .zio_flag_io_bypass
        .filter(|v| v.is_power_of_two() && v.trailing_zeros() < 32)
    {
        semantics.zio_flag_io_bypass_bit = bit.trailing_zeros();
    }
    semantics
}

/// Map sizes. Stack maps are allocated whole at load: the sample maps are
/// sized for the rate (one entry without sampling), the off-CPU ones only
/// when used.
fn map_sizes(options: &SessionOptions, cpus: usize) -> MapSizes {
    let mut samples = stacks::SampleMapSizes::for_rate(options.sample_hz, cpus as u64);
    if let Some(entries) = options.stack_entries {
        samples.stacks = entries;
    }
    if options.sample_hz == 0 {
        samples = stacks::SampleMapSizes {
            stacks: 1,
            samples: 1,
        };
    }
    MapSizes {
        hist: options.hist_entries,
        samples,
        offcpu_stacks: if options.off_cpu {
            stacks::OFFCPU_STACK_SLOTS
        } else {
            1
        },
        requests: options.request_rows,
    }
}

/// Lifts the memory-locked limit, which bounded map memory before Linux
/// 5.11 (harmless after).
pub fn raise_memlock_limit() {
    let rlimit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlimit) };
}

/// Loads the object with `config`'s globals and map sizes (its programs
/// are loaded into the kernel later, as they are attached).
pub fn load(config: &LoadConfig) -> anyhow::Result<Ebpf> {
    let maps = &config.maps;
    EbpfLoader::new()
        .override_global("CONFIG", &config.config, true)
        .map_max_entries("HIST", maps.hist)
        .map_max_entries("CPU_STACKS_0", maps.samples.stacks)
        .map_max_entries("CPU_STACKS_1", maps.samples.stacks)
        .map_max_entries("SAMPLES_0", maps.samples.samples)
        .map_max_entries("SAMPLES_1", maps.samples.samples)
        .map_max_entries("OFFCPU_STACKS_0", maps.offcpu_stacks)
        .map_max_entries("OFFCPU_STACKS_1", maps.offcpu_stacks)
        .map_max_entries("REQUESTS", maps.requests)
        .load(EBPF_OBJECT)
        .context("loading zprof's eBPF object failed")
}

/// OpenZFS 2.2+ can make zvols blk-mq devices (zvol_use_blk_mq=1, for zvols
/// created after it is set); their requests enter through zvol_mq_queue_rq,
/// which zprof does not time yet: say so rather than show fewer requests.
pub fn zvol_blk_mq_warning() -> Option<String> {
    let value = std::fs::read_to_string("/sys/module/zfs/parameters/zvol_use_blk_mq").ok()?;
    (value.trim() == "1").then(|| {
        "zvol_use_blk_mq is 1: requests of zvols created since it was set (blk-mq devices) are not in the requests section".into()
    })
}

#[cfg(test)]
mod tests {
    use std::{path::Path, time::Duration};

    use zprof_common::{FLUSH_LEAF_ISSUE_TO_DONE, FLUSH_TIMED_CALL};

    use super::*;
    use crate::{
        collect::real_builds::{LIBZPOOL_2_1_11, LIBZPOOL_2_3_2, ZFS_KO_2_1_11_ATTACHED},
        zfs::offsets,
    };

    /// `zprof probes`' options (no filter, no sampling, small maps).
    fn probes_options() -> SessionOptions {
        SessionOptions {
            filter_pids: None,
            hist_entries: 64,
            sample_hz: 0,
            stack_entries: Some(64),
            full_timing: false,
            skip: Vec::new(),
            off_cpu: false,
            slower_than: None,
            request_rows: 64,
        }
    }

    /// task_newtask's pid and clone_flags on Linux 6.18.44 (see tracepoints'
    /// test), sched_switch unused.
    const NEWTASK_6_18: TracepointOffsets = TracepointOffsets {
        newtask: (8, 32),
        switch: (0, 0),
    };

    #[test]
    fn debian_libzpool_2_1_11_loads_with_its_table_and_the_2_1_rules() {
        let build = &LIBZPOOL_2_1_11;
        let found = offsets::for_libzpool(Some(build.build_id), None).unwrap();
        let table = found.offsets;
        let load = LoadConfig::new(
            &build.target(Some(build.zfs_version), false),
            found,
            &probes_options(),
            TracepointOffsets::default(),
            2,
        );
        assert_eq!(
            load.config,
            Config {
                kernel: 0,
                filter_tgid: 0,
                newtask_pid_offset: 0,
                newtask_flags_offset: 0,
                // io_error (4 bytes at 812) ends last, as zprof-common's test says.
                zio_read_len: 816,
                slow_request_us: 0,
                switch_prev_state_offset: 0,
                switch_next_pid_offset: 0,
                semantics: Semantics {
                    zio_flag_io_bypass_bit: 21,
                    compress_level_arg: 4,
                    flush_mode: FLUSH_TIMED_CALL,
                    zio_type_flush: 5,
                    zio_flag_config_writer_bit: 9,
                },
                offsets: table,
                request: Default::default(),
            }
        );
        assert_ne!(table.valid, 0);
        assert_eq!(load.release.status.word(), "verified");
        assert!(load.warnings().is_empty(), "{:?}", load.warnings());
        assert_eq!(
            load.maps,
            MapSizes {
                hist: 64,
                samples: stacks::SampleMapSizes {
                    stacks: 1,
                    samples: 1
                },
                offcpu_stacks: 1,
                requests: 64,
            }
        );
    }

    #[test]
    fn a_version_given_by_hand_is_read_with_its_rules_but_not_called_verified() {
        let build = &LIBZPOOL_2_3_2;
        let load = LoadConfig::new(
            &build.target(Some("2.3.2"), true),
            offsets::for_libzpool(Some(build.build_id), None).unwrap(),
            &probes_options(),
            TracepointOffsets::default(),
            2,
        );
        assert_eq!(load.config.semantics.zio_flag_io_bypass_bit, 22);
        assert_eq!(load.config.semantics.compress_level_arg, 5);
        assert_eq!(load.config.semantics.flush_mode, FLUSH_LEAF_ISSUE_TO_DONE);
        assert_eq!(
            load.warnings(),
            vec![
                "OpenZFS 2.3.2: unverified: release 2.3.2 given with --zfs-version; zprof verified its Debian build, not this one"
            ]
        );
    }

    #[test]
    fn a_kernel_without_offsets_says_what_is_lost() {
        let build = &ZFS_KO_2_1_11_ATTACHED;
        let found = offsets::for_kernel(&offsets::KernelSources {
            module_btf: Path::new("/nonexistent/btf/zfs"),
            vmlinux_btf: Path::new("/nonexistent/btf/vmlinux"),
            table: None,
            build_id: None,
            zfs_version: Some(build.zfs_version),
            kernel_release: "6.1.0",
        })
        .unwrap();
        let source = found.source.clone();
        let load = LoadConfig::new(
            &build.target(Some(build.zfs_version), false),
            found,
            &probes_options(),
            TracepointOffsets::default(),
            2,
        );
        assert_eq!(load.config.kernel, 1);
        assert_eq!(load.config.zio_read_len, 0);
        assert_eq!(load.config.offsets.valid, 0);
        assert_eq!(load.config.request.valid, 0);
        assert_eq!(
            load.warnings(),
            vec![format!(
                "no struct offsets ({source}): vdev queue/disk split per priority and pool attribution are unavailable; vdev time falls back to vdev_queue_io..vdev_queue_io_done"
            )]
        );
    }

    #[test]
    fn the_options_set_the_filter_the_slow_request_bound_and_the_map_sizes() {
        let build = &LIBZPOOL_2_1_11;
        let options = SessionOptions {
            filter_pids: Some(Vec::new()),
            sample_hz: 99,
            stack_entries: None,
            off_cpu: true,
            slower_than: Some(Duration::from_millis(20)),
            ..probes_options()
        };
        let load = LoadConfig::new(
            &build.target(Some(build.zfs_version), false),
            offsets::for_libzpool(Some(build.build_id), None).unwrap(),
            &options,
            NEWTASK_6_18,
            2,
        );
        assert_eq!(load.config.filter_tgid, 1);
        assert_eq!(
            (
                load.config.newtask_pid_offset,
                load.config.newtask_flags_offset
            ),
            (8, 32)
        );
        assert_eq!(load.config.slow_request_us, 20_000);
        assert_eq!(load.maps.samples, stacks::SampleMapSizes::for_rate(99, 2));
        assert_eq!(load.maps.offcpu_stacks, stacks::OFFCPU_STACK_SLOTS);
        // A bound below a microsecond still streams only slow requests.
        let options = SessionOptions {
            slower_than: Some(Duration::from_nanos(500)),
            stack_entries: Some(4096),
            ..options
        };
        let load = LoadConfig::new(
            &build.target(Some(build.zfs_version), false),
            offsets::for_libzpool(Some(build.build_id), None).unwrap(),
            &options,
            NEWTASK_6_18,
            2,
        );
        assert_eq!(load.config.slow_request_us, 1);
        assert_eq!(load.maps.samples.stacks, 4096);
    }
}

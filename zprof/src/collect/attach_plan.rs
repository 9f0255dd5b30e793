//! Which catalogue points a session attaches, with which programs, and why
//! each of the others is not attached.
//!
//! Decided from the target's functions, its struct offsets, the release's
//! interpretation and the options, without touching the kernel, so every
//! reason a `zprof probes` row can give is unit-tested without root. The
//! attaching itself (and the reason an attach failed) is
//! [`crate::collect::attach`]'s.

use std::collections::HashMap;

use crate::{
    recording::ProbeStatus,
    zfs::{
        catalogue::{self, ProbePoint, Role, UprobeDefault},
        offsets::FoundOffsets,
        releases,
    },
};

/// What the plan is decided from.
#[derive(Debug, Clone, Copy)]
pub struct PlanInputs<'a> {
    /// zfs.ko (kprobes) rather than libzpool (uprobes).
    pub kernel: bool,
    /// The traced object, as reasons name it.
    pub object: &'a str,
    /// The target's functions: name -> file offset (libzpool) or address (kernel).
    pub functions: &'a HashMap<String, u64>,
    /// How the traced release is interpreted (function names, unavailable groups).
    pub release: &'a releases::Interpretation,
    /// How flushes are timed on this release (`zprof_common::FLUSH_*`).
    pub flush_mode: u32,
    /// The struct offsets the programs get.
    pub offsets: &'a FoundOffsets,
    /// Stage groups left out (`--skip`).
    pub skip: &'a [String],
    /// Time every per-operation point on uprobes too (`--full-timing`).
    pub full_timing: bool,
}

/// One catalogue point of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedPoint {
    /// Its row as reported; `attached` stays false until it is attached,
    /// `reason` says why it will not be.
    pub status: ProbeStatus,
    /// What to attach; `None` when `status.reason` says why not.
    pub attach: Option<Attachment>,
}

/// The programs to attach for one point, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The function probed (the release's name for the catalogue's role).
    pub function: &'static str,
    /// Its file offset (libzpool) or address (kernel).
    pub start: u64,
    /// The program run at entry, with its target suffix (none for a point
    /// read at its return only).
    pub entry_program: Option<String>,
    /// The program run at return, if the point is timed.
    pub return_program: Option<String>,
}

/// The plan for every catalogue point that applies to the target and to the
/// release's flush mode, in catalogue order.
pub fn plan(points: &'static [ProbePoint], inputs: &PlanInputs) -> Vec<PlannedPoint> {
    points
        .iter()
        .filter(|p| catalogue::applies(p, inputs.kernel))
        .filter(|p| p.flush_mode.is_none_or(|mode| mode == inputs.flush_mode))
        .map(|p| plan_point(p, inputs))
        .collect()
}

/// One point: its status, then each reason not to attach it in turn (the
/// first that applies is the one reported).
fn plan_point(point: &ProbePoint, inputs: &PlanInputs) -> PlannedPoint {
    let function = inputs
        .release
        .function_name(point.function, |f| inputs.functions.contains_key(f));
    let mut status = ProbeStatus {
        group: point.group.to_owned(),
        function: function.to_owned(),
        role: point.function.to_owned(),
        offset: 0,
        returns: point.ret.is_some(),
        entry: point.entry.is_some(),
        attached: false,
        reason: None,
        note: point
            .kernel_gain
            .map(|gain| format!("static, kernel only; gains {gain}")),
    };
    let not_attached = |mut status: ProbeStatus, reason: String| {
        status.reason = Some(reason);
        PlannedPoint {
            status,
            attach: None,
        }
    };
    if let Some(reason) = left_out(point, inputs) {
        return not_attached(status, reason);
    }
    let (entry, ret) = match programs(point, inputs, &mut status) {
        Ok(programs) => programs,
        Err(reason) => return not_attached(status, reason),
    };
    let Some(&start) = inputs.functions.get(function) else {
        let reason = inputs
            .release
            .added_later(point.function)
            .unwrap_or_else(|| format!("{function} not found in {}", inputs.object));
        return not_attached(status, reason);
    };
    PlannedPoint {
        status,
        attach: Some(Attachment {
            function,
            start,
            entry_program: entry.map(|entry| catalogue::program_name(entry, inputs.kernel)),
            return_program: ret.map(|ret| catalogue::program_name(ret, inputs.kernel)),
        }),
    }
}

/// Why a point is left out whatever the build has: `--skip`, a release
/// zprof cannot interpret, or struct offsets it needs (or replaces).
fn left_out(point: &ProbePoint, inputs: &PlanInputs) -> Option<String> {
    if inputs.skip.iter().any(|g| g == point.group) {
        return Some(format!("left out with --skip {}", point.group));
    }
    if let Some(why) = inputs.release.unavailable(point.group) {
        return Some(why);
    }
    let offsets = inputs.offsets;
    let has_offsets = offsets.offsets.valid != 0;
    if let Some(member) = point
        .needs_members
        .iter()
        .find(|m| !offsets.values.contains_key(**m))
    {
        return Some(format!(
            "needs the offset of {member}, which the offsets ({}) do not give",
            offsets.source
        ));
    }
    match point.role {
        Role::NeedsOffsets if !has_offsets => {
            Some(format!("needs struct offsets: {}", offsets.source))
        }
        Role::NeedsRequestOffsets if offsets.request.valid == 0 => {
            let why = offsets.request_missing.as_deref().unwrap_or("unknown");
            Some(format!("needs the request layer's struct offsets: {why}"))
        }
        Role::FallbackWithoutOffsets if has_offsets => {
            Some("not needed: the leaf-I/O probe reads ZFS's own timings".into())
        }
        _ => None,
    }
}

/// The entry and return programs (without their target suffix). A
/// per-operation pair on uprobes costs a trap per call each, so without
/// `--full-timing` it is counted at entry only (the status says so) or not
/// attached (the error says where the figures come from instead).
fn programs(
    point: &ProbePoint,
    inputs: &PlanInputs,
    status: &mut ProbeStatus,
) -> Result<(Option<&'static str>, Option<&'static str>), String> {
    match point.role {
        Role::PerOp(default) if !inputs.kernel && !inputs.full_timing => match default {
            UprobeDefault::Count(program) => {
                status.returns = false;
                status.note = Some("counted at entry only; --full-timing adds the return probe (about 0.7 us per call)".into());
                Ok((Some(program), None))
            }
            UprobeDefault::Skip(why) => Err(format!("not needed: {why}")),
        },
        _ => Ok((point.entry, point.ret)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use zprof_common::{FLUSH_LEAF_ISSUE_TO_DONE, FLUSH_TIMED_CALL};

    use super::*;
    use crate::{
        collect::real_builds::{
            LIBZPOOL_2_1_11, LIBZPOOL_2_3_2, LIBZPOOL_2_3_9, LIBZPOOL_2_4_4, RealBuild,
            ZFS_KO_2_1_11_ATTACHED,
        },
        zfs::offsets,
    };

    /// What a plan is decided from, as `zprof record` would have it for a build.
    struct Case {
        build: &'static RealBuild,
        functions: HashMap<String, u64>,
        release: releases::Interpretation,
        offsets: FoundOffsets,
        skip: Vec<String>,
        full_timing: bool,
    }

    impl Case {
        /// A libzpool build with its release named and its built-in offsets table.
        fn libzpool(build: &'static RealBuild) -> Case {
            Case {
                build,
                functions: build.function_map(),
                release: releases::interpret(Some(build.zfs_version), false),
                offsets: offsets::for_libzpool(Some(build.build_id), None).unwrap(),
                skip: Vec::new(),
                full_timing: false,
            }
        }

        fn plan(&self) -> Vec<PlannedPoint> {
            let kernel = self.build.kind == crate::zfs::target::TargetKind::Kernel;
            plan(
                catalogue::POINTS,
                &PlanInputs {
                    kernel,
                    object: self.build.object,
                    functions: &self.functions,
                    release: &self.release,
                    flush_mode: self.release.semantics(kernel).flush_mode,
                    offsets: &self.offsets,
                    skip: &self.skip,
                    full_timing: self.full_timing,
                },
            )
        }
    }

    /// The plan's first row for the point of role `role` (its catalogue
    /// function; vdev_queue_io_done has two points).
    fn row<'a>(plan: &'a [PlannedPoint], role: &str) -> &'a PlannedPoint {
        plan.iter()
            .find(|p| p.status.role == role)
            .unwrap_or_else(|| panic!("no {role} in the plan"))
    }

    fn reason(point: &PlannedPoint) -> &str {
        point.status.reason.as_deref().unwrap_or("")
    }

    #[test]
    fn fast_dedup_points_name_the_release_that_brought_them() {
        let plan = Case::libzpool(&LIBZPOOL_2_1_11).plan();
        assert_eq!(
            reason(row(&plan, "ddt_log_take_first")),
            "not in OpenZFS 2.1.11: fast dedup's log came in 2.3"
        );
        let plan = Case::libzpool(&LIBZPOOL_2_4_4).plan();
        let begin = row(&plan, "ddt_log_begin").attach.as_ref().unwrap();
        assert_eq!(
            begin.entry_program.as_deref(),
            Some("ddt_log_begin_entry_u")
        );
        assert_eq!(begin.return_program, None);
        let take = row(&plan, "ddt_log_take_first").attach.as_ref().unwrap();
        assert_eq!(take.entry_program, None, "read at its return only");
        assert_eq!(
            take.return_program.as_deref(),
            Some("ddt_log_take_return_u")
        );
    }

    #[test]
    fn debian_libzpool_2_1_11_has_every_function_its_points_probe() {
        let plan = Case::libzpool(&LIBZPOOL_2_1_11).plan();
        let expected: Vec<&str> = catalogue::POINTS
            .iter()
            .filter(|p| catalogue::applies(p, false))
            .filter(|p| p.flush_mode.is_none_or(|m| m == FLUSH_TIMED_CALL))
            .map(|p| p.function)
            .collect();
        let roles: Vec<&str> = plan.iter().map(|p| p.status.role.as_str()).collect();
        assert_eq!(roles, expected, "catalogue order, the 2.1 flush points");
        assert!(roles.iter().all(|r| *r != "zfs_read"), "no request layer");
        for point in &plan {
            assert!(!reason(point).contains("not found"), "{point:?}");
            // A reason exactly when nothing is attached.
            assert_eq!(
                point.attach.is_none(),
                point.status.reason.is_some(),
                "{point:?}"
            );
            assert!(!point.status.attached, "attached only by attaching");
        }
    }

    /// The allocation classes' point reads two optional members: with
    /// --full-timing it attaches where the table has them, and says which
    /// one is missing where it has not (a table made before zprof read them).
    #[test]
    fn a_point_needing_optional_members_says_which_is_missing() {
        let mut case = Case::libzpool(&LIBZPOOL_2_4_4);
        case.full_timing = true;
        let plan = case.plan();
        assert!(row(&plan, "metaslab_alloc").attach.is_some());
        case.offsets.values.remove("spa.spa_dedup_class");
        let plan = case.plan();
        let alloc = row(&plan, "metaslab_alloc");
        assert!(alloc.attach.is_none());
        assert!(
            reason(alloc)
                .starts_with("needs the offset of spa.spa_dedup_class, which the offsets ("),
            "{alloc:?}"
        );
    }

    #[test]
    fn uprobes_count_or_skip_per_operation_points_unless_full_timing() {
        let mut case = Case::libzpool(&LIBZPOOL_2_1_11);
        let plan = case.plan();
        let dmu_write = row(&plan, "dmu_write");
        assert_eq!(
            dmu_write.attach,
            Some(Attachment {
                function: "dmu_write",
                start: 0,
                entry_program: Some("dmu_write_count_u".into()),
                return_program: None,
            })
        );
        assert!(!dmu_write.status.returns);
        assert_eq!(
            dmu_write.status.note.as_deref(),
            Some(
                "counted at entry only; --full-timing adds the return probe (about 0.7 us per call)"
            )
        );
        for skipped in [
            "dmu_tx_assign",
            "zio_checksum_compute",
            "arc_read",
            "zio_wait",
            "metaslab_alloc",
        ] {
            let point = row(&plan, skipped);
            assert!(point.attach.is_none(), "{point:?}");
            assert!(reason(point).starts_with("not needed: "), "{point:?}");
            assert!(reason(point).contains("--full-timing"), "{point:?}");
        }

        case.full_timing = true;
        let plan = case.plan();
        let dmu_write = row(&plan, "dmu_write");
        assert!(dmu_write.status.returns && dmu_write.status.note.is_none());
        let attach = dmu_write.attach.as_ref().unwrap();
        assert_eq!(attach.entry_program.as_deref(), Some("dmu_write_entry_u"));
        assert_eq!(attach.return_program.as_deref(), Some("write_return_u"));
        let assign = row(&plan, "dmu_tx_assign");
        assert_eq!(
            assign
                .attach
                .as_ref()
                .and_then(|a| a.entry_program.as_deref()),
            Some("tx_assign_entry_u")
        );
    }

    #[test]
    fn with_offsets_the_leaf_io_probe_replaces_the_queue_probes() {
        let plan = Case::libzpool(&LIBZPOOL_2_1_11).plan();
        let queue = row(&plan, "vdev_queue_io");
        assert_eq!(
            reason(queue),
            "not needed: the leaf-I/O probe reads ZFS's own timings"
        );
        let done = plan
            .iter()
            .find(|p| p.status.role == "vdev_queue_io_done" && p.attach.is_some())
            .expect("the leaf-I/O point of vdev_queue_io_done");
        assert_eq!(
            done.attach.as_ref().unwrap().entry_program.as_deref(),
            Some("vdev_done_entry_u")
        );
    }

    #[test]
    fn without_offsets_points_that_need_them_say_where_they_were_looked_for() {
        let mut case = Case::libzpool(&LIBZPOOL_2_1_11);
        // What a build without a build-id gets (zfs::offsets' own reason).
        case.offsets = offsets::for_libzpool(None, None).unwrap();
        let plan = case.plan();
        let done: Vec<&PlannedPoint> = plan
            .iter()
            .filter(|p| p.status.role == "vdev_queue_io_done")
            .collect();
        assert_eq!(done.len(), 2, "the leaf-I/O point and its fallback");
        assert_eq!(
            reason(done[0]),
            format!("needs struct offsets: {}", case.offsets.source)
        );
        assert_eq!(
            done[1].attach.as_ref().unwrap().entry_program.as_deref(),
            Some("vdev_queue_done_entry_u")
        );
        assert!(row(&plan, "vdev_queue_io").attach.is_some());
    }

    /// trixie-backports' libzpool 2.4.4: zil_commit wraps zil_commit_flags
    /// (which zil_close calls directly), so the commit is probed there, and
    /// the build's offsets come from the shipped table.
    #[test]
    fn the_2_4_4_build_probes_zil_commit_flags_with_its_own_offsets() {
        let case = Case::libzpool(&LIBZPOOL_2_4_4);
        assert_ne!(case.offsets.offsets.valid, 0, "{}", case.offsets.source);
        let plan = case.plan();
        let commit = row(&plan, "zil_commit").attach.as_ref().map(|a| a.function);
        assert_eq!(commit, Some("zil_commit_flags"));
        assert_eq!(
            row(&plan, "txg_wait_synced")
                .attach
                .as_ref()
                .map(|a| a.function),
            Some("txg_wait_synced_flags")
        );
        let missing: Vec<&str> = plan
            .iter()
            .filter(|p| p.attach.is_none())
            .filter_map(|p| p.status.reason.as_deref())
            .filter(|r| r.contains("not found") || r.contains("needs struct offsets"))
            .collect();
        assert!(missing.is_empty(), "{missing:?}");
    }

    #[test]
    fn the_2_3_builds_probe_the_functions_their_series_names() {
        let plan_2_3_2 = Case::libzpool(&LIBZPOOL_2_3_2).plan();
        let plan_2_3_9 = Case::libzpool(&LIBZPOOL_2_3_9).plan();
        let function =
            |plan: &[PlannedPoint], role: &str| row(plan, role).attach.as_ref().map(|a| a.function);
        assert_eq!(
            function(&plan_2_3_2, "lz4_compress_zfs"),
            Some("zfs_lz4_compress")
        );
        assert_eq!(
            row(&plan_2_3_2, "lz4_compress_zfs").status.function,
            "zfs_lz4_compress"
        );
        // 2.3.3 made txg_wait_synced a wrapper of txg_wait_synced_flags.
        assert_eq!(
            function(&plan_2_3_2, "txg_wait_synced"),
            Some("txg_wait_synced")
        );
        assert_eq!(
            function(&plan_2_3_9, "txg_wait_synced"),
            Some("txg_wait_synced_flags")
        );
        // libzpool 2.3 fsyncs leaves on a taskq: each leaf flush is timed to
        // its zio_interrupt, and zio_flush's own call is not.
        for plan in [&plan_2_3_2, &plan_2_3_9] {
            let flush: Vec<(&str, &str)> = plan
                .iter()
                .filter(|p| p.status.group == "flush")
                .map(|p| {
                    let program = p.attach.as_ref().unwrap().entry_program.as_deref().unwrap();
                    (p.status.role.as_str(), program)
                })
                .collect();
            assert_eq!(
                flush,
                vec![
                    ("zio_flush", "flush_leaf_entry_u"),
                    ("zio_interrupt", "flush_done_entry_u")
                ]
            );
        }
        let plan_2_1 = Case::libzpool(&LIBZPOOL_2_1_11).plan();
        let flush: Vec<&str> = plan_2_1
            .iter()
            .filter(|p| p.status.group == "flush")
            .map(|p| p.attach.as_ref().unwrap().entry_program.as_deref().unwrap())
            .collect();
        assert_eq!(flush, vec!["flush_entry_u"]);
        assert_eq!(
            catalogue::POINTS
                .iter()
                .filter(|p| p.flush_mode == Some(FLUSH_LEAF_ISSUE_TO_DONE))
                .count(),
            2
        );
    }

    /// The unit-test half of the integration test
    /// an_unknown_build_makes_release_dependent_stages_unavailable: 2.3.2's
    /// functions under a build-id zprof does not know, no version given.
    #[test]
    fn an_unknown_release_leaves_out_only_the_stages_whose_meaning_moved() {
        let mut case = Case::libzpool(&LIBZPOOL_2_3_2);
        case.release = releases::interpret(None, false);
        // The build-id with its first byte inverted, as the integration test does.
        case.offsets =
            offsets::for_libzpool(Some("555ac3b917c3d688984d586629dbe184d3cb587c"), None).unwrap();
        let plan = case.plan();
        for point in &plan {
            let sensitive = releases::SENSITIVE_GROUPS
                .iter()
                .any(|(g, _)| *g == point.status.group);
            if sensitive {
                assert!(
                    reason(point).contains("moved between releases")
                        && reason(point).contains("this build's release is unknown"),
                    "{point:?}"
                );
            }
        }
        for role in ["zio_compress_data", "vdev_queue_io_done", "zio_flush"] {
            assert!(row(&plan, role).attach.is_none(), "{role}");
        }
        for role in ["zil_commit", "spa_sync", "dmu_write"] {
            assert!(row(&plan, role).attach.is_some(), "{role}");
        }
    }

    #[test]
    fn skipped_groups_say_which_flag_left_them_out() {
        let mut case = Case::libzpool(&LIBZPOOL_2_1_11);
        case.skip = vec!["zil".into()];
        let plan = case.plan();
        for point in plan.iter().filter(|p| p.status.group == "zil") {
            assert_eq!(reason(point), "left out with --skip zil");
            assert!(point.attach.is_none());
        }
        assert!(row(&plan, "spa_sync").attach.is_some());
    }

    #[test]
    fn a_function_the_build_lacks_is_named_with_the_object() {
        let mut case = Case::libzpool(&LIBZPOOL_2_1_11);
        // The real set, with one function taken out.
        case.functions.remove("zil_commit");
        let plan = case.plan();
        let commit = row(&plan, "zil_commit");
        assert_eq!(
            reason(commit),
            "zil_commit not found in /usr/lib/x86_64-linux-gnu/libzpool.so.5"
        );
        assert!(commit.attach.is_none());
    }

    #[test]
    fn the_kernel_times_every_point_and_needs_the_request_offsets() {
        let build = &ZFS_KO_2_1_11_ATTACHED;
        // What a kernel without module BTF or a table gets (zfs::offsets' own reason).
        let found = offsets::for_kernel(&offsets::KernelSources {
            module_btf: Path::new("/nonexistent/btf/zfs"),
            vmlinux_btf: Path::new("/nonexistent/btf/vmlinux"),
            table: None,
            build_id: None,
            zfs_version: Some(build.zfs_version),
            kernel_release: "6.1.0",
        })
        .unwrap();
        let case = Case {
            build,
            functions: build.function_map(),
            release: releases::interpret(Some(build.zfs_version), true),
            offsets: found,
            skip: Vec::new(),
            full_timing: false,
        };
        let plan = case.plan();
        for role in ["zfs_read", "zfs_write", "zfs_fsync"] {
            let attach = row(&plan, role).attach.as_ref().unwrap();
            assert_eq!(
                attach.return_program.as_deref(),
                Some("file_request_done_k")
            );
        }
        let submit = row(&plan, "zvol_submit_bio");
        assert!(
            reason(submit).starts_with("needs the request layer's struct offsets: "),
            "{submit:?}"
        );
        // Per-operation points are timed pairs on kprobes, whatever the options.
        let assign = row(&plan, "dmu_tx_assign");
        assert_eq!(
            assign.attach.as_ref().unwrap().return_program.as_deref(),
            Some("tx_assign_return_k")
        );
        assert!(assign.status.returns && assign.status.note.is_none());
        let lwb = row(&plan, "zil_lwb_write_issue");
        assert!(reason(lwb).starts_with("needs struct offsets: "), "{lwb:?}");
        assert!(
            lwb.status
                .note
                .as_deref()
                .is_some_and(|n| n.starts_with("static, kernel only; gains ")),
            "{lwb:?}"
        );
        assert!(plan.iter().all(|p| p.status.group != "flush"
            || p.attach.as_ref().unwrap().entry_program.as_deref() == Some("flush_entry_k")));
    }
}

//! The built-in offsets tables must match their releases' headers: this
//! regenerates each with scripts/offsets-table.sh (zprof/offsets/zfs_offsets.c
//! compiled against the release's headers) and compares, so a stale or
//! hand-edited table fails here rather than as wrong numbers in a report.

use std::{path::Path, process::Command};

use serde_json::Value;

#[test]
fn every_builtin_libzpool_table_matches_its_release_headers() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(workspace.join("zprof/offsets")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(version) = name
            .strip_prefix("libzpool-")
            .and_then(|n| n.strip_suffix("-debian.json"))
        else {
            continue;
        };
        let table: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let output = Command::new(workspace.join("scripts/offsets-table.sh"))
            .arg(version)
            .output()
            .expect(
                "scripts/offsets-table.sh needs bash and gcc (cargo xtask setup installs them)",
            );
        assert!(
            output.status.success(),
            "{version}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let generated: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            generated["offsets"], table["offsets"],
            "{name}: regenerate with scripts/offsets-table.sh {version}"
        );
        assert_eq!(generated["sizes"], table["sizes"], "{name}");
        assert_eq!(
            generated["build_ids"], table["build_ids"],
            "{name}: the table names the build it was made for"
        );
        checked.push(version.to_owned());
    }
    checked.sort();
    assert_eq!(
        checked,
        ["2.1.11", "2.3.2", "2.3.9", "2.4.4"],
        "every shipped table is checked"
    );
}

/// 2.3 moved the zio_t members zprof reads; a table copied from 2.1.11 would
/// read garbage. The shipped 2.3.2 table carries the values of the 2.3.2
/// disassembly (vdev_stat_update and vdev_queue_io_done read these offsets).
#[test]
fn the_2_3_2_table_has_the_offsets_of_its_binary() {
    let text = include_str!("../../zprof/offsets/libzpool-2.3.2-debian.json");
    let table: Value = serde_json::from_str(text).unwrap();
    let offsets = &table["offsets"];
    for (member, value) in [
        ("zio.io_type", 0x78),
        ("zio.io_spa", 0x98),
        ("zio.io_vd", 0x240),
        ("zio.io_timestamp", 0x2a0),
        ("zio.io_delta", 0x2b8),
        ("zio.io_flags", 0x2e8),
        ("zio.io_error", 0x30c),
        ("vdev.vdev_children", 0x90),
    ] {
        assert_eq!(offsets[member], value, "{member}");
    }
    assert_eq!(
        table["sizes"]["zio.io_flags"], 8,
        "io_flags is 64 bits wide from 2.2"
    );
}
